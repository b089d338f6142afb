"""bxctl chat against a fake loopd: --json frames, --say, exit codes, resume or create, piped
input with commands and blocks, the status line's timer."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from boxmaker import proto as p
from boxmaker.channel import END, NEED_DATA, FrameDecoder, encode_frame
from boxmaker.cli.bxctl import build_parser
from boxmaker.cli.chat import Chat
from boxmaker.cli.chat_command import new_session_id, run_chat
from boxmaker.cli.commands import EXIT_CODES
from boxmaker.cli.render import CLEAR_LINE, Renderer
from boxmaker.serving.listener import open_unix_listener

from ..helpers import deadline

USAGE = p.Usage(cache_n=10, prompt_n=5, predicted_n=3, reasoning_tokens=0, thinking_capped=False)
Answer = list[p.Frame | float]  # a float: sleep that long before the next frame


class FakeLoopd:
    """Answers each turn frame with the next scripted list of frames; a connection that says
    nothing (bxctl's check that loopd is there) is dropped, as loopd does."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.turns: list[p.TurnFrame] = []
        self.connections = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        decoder = FrameDecoder()
        while (frame := decoder.next_frame()) is NEED_DATA:
            decoder.receive_data(await stream.receive_some())
        if frame is END:
            return
        assert isinstance(frame, p.TurnFrame)
        self.turns.append(frame)
        for item in self.answers.pop(0):
            if isinstance(item, float):
                await trio.sleep(item)
            else:
                await stream.send_all(encode_frame(item))
        await stream.aclose()


@asynccontextmanager
async def fake_loopd(tmp_path: Path, answers: list[Answer]) -> AsyncIterator[FakeLoopd]:
    fake = FakeLoopd(answers)
    path = tmp_path / "loop.sock"
    listener = await open_unix_listener(path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, fake.handle, [listener])
        yield fake
        nursery.cancel_scope.cancel()


def args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["chat", "--socket", str(tmp_path / "loop.sock"), *argv])


def events(*texts: str) -> list[p.Frame]:
    return [p.TurnEventFrame(p.Content(t)) for t in texts]


def lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def event(event: p.TurnEvent) -> dict[str, object]:
    return {"kind": "turn_event", "final": False, "body": {"event": p.unstructure(event)}}


SESSION_S1 = {"kind": "session", "final": False, "body": {"session": "s1"}}
DONE_HELLO = {"kind": "turn_done", "final": True,
              "body": {"content": "Hello.", "usage": p.unstructure(USAGE)}}  # fmt: skip


async def test_json_prints_every_frame_as_one_line_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer: Answer = [*events("Hel", "lo."), p.TurnDoneFrame("Hello.", USAGE)]
    async with fake_loopd(tmp_path, [answer]) as loopd:
        code = await run_chat(args(tmp_path, "--json", "--session", "s1", "--say", "Hi"), {})
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    assert lines(captured.out) == [
        SESSION_S1,
        event(p.Content("Hel")),
        event(p.Content("lo.")),
        DONE_HELLO,
    ]
    assert loopd.turns == [p.TurnFrame(p.SessionId("s1"), "Hi", resume=True, thinking=True)]


async def test_json_lines_batches_text_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thinking = [p.TurnEventFrame(p.Reasoning(t)) for t in ("Hm", "m.\n", "Ok")]
    answer: Answer = [*thinking, *events("Hel", "lo,\nwor", "ld\n\n", "Bye"),
                      p.TurnEventFrame(p.ToolCallStarted("clock")), *events("!"),
                      p.TurnDoneFrame("Hello.", USAGE)]  # fmt: skip
    async with fake_loopd(tmp_path, [answer]):
        code = await run_chat(args(tmp_path, "--json=lines", "--session", "s1", "--say", "Hi"), {})
    assert code == 0
    assert lines(capsys.readouterr().out) == [
        SESSION_S1,
        event(p.Reasoning("Hmm.\n")),
        event(p.Reasoning("Ok")),  # the open line, before the answer's text
        event(p.Content("Hello,\n")),
        event(p.Content("world\n")),
        event(p.Content("\n")),
        event(p.Content("Bye")),  # the open line, before any other frame
        event(p.ToolCallStarted("clock")),
        event(p.Content("!")),
        DONE_HELLO,
    ]


async def test_say_into_a_pipe_prints_only_the_answer_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    retried = [*events("Half"), p.TurnEventFrame(p.Retrying(2, 10, "cut")), *events("Whole.")]
    async with fake_loopd(tmp_path, [[*retried, p.TurnDoneFrame("Whole.", USAGE)]]) as loopd:
        code = await run_chat(args(tmp_path, "--say", "Hi", "--no-thinking"), {})
    captured = capsys.readouterr()
    assert (code, captured.out) == (0, "Whole.\n")
    session = captured.err.removeprefix("session ").strip()
    [turn] = loopd.turns
    assert turn == p.TurnFrame(p.SessionId(session), "Hi", resume=False, thinking=False)


@pytest.mark.parametrize("code", list(p.ErrorCode))
async def test_each_error_code_has_its_own_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], code: p.ErrorCode
) -> None:
    error = p.WireError(code, "it went wrong")
    retried = p.WireError(code, "and again")  # the resume-or-create guess asks twice for two
    async with fake_loopd(tmp_path, [[error], [retried]]):
        status = await run_chat(args(tmp_path, "--session", "s1", "--say", "Hi"), {})
    captured = capsys.readouterr()
    assert status == EXIT_CODES[code]
    assert captured.out == ""
    assert captured.err.startswith(f"session s1\nerror: {code.value}: ")


async def test_an_error_with_json_is_a_final_error_frame_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = p.WireError(p.ErrorCode.SESSION_BUSY, "session s1 is already in a turn")
    async with fake_loopd(tmp_path, [[busy]]):
        code = await run_chat(args(tmp_path, "--json", "--session", "s1", "--say", "Hi"), {})
    captured = capsys.readouterr()
    assert (code, captured.err) == (15, "")
    assert lines(captured.out)[-1] == {"kind": "error", "final": True,
        "body": {"code": "session_busy", "message": "session s1 is already in a turn"}}  # fmt: skip


async def test_a_named_session_that_does_not_exist_yet_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = p.WireError(p.ErrorCode.NO_SUCH_SESSION, "no session s9")
    async with fake_loopd(tmp_path, [[missing], [p.TurnDoneFrame("New.", USAGE)]]) as loopd:
        code = await run_chat(args(tmp_path, "--session", "s9", "--say", "Hi"), {})
    assert (code, capsys.readouterr().out) == (0, "New.\n")
    assert [t.resume for t in loopd.turns] == [True, False]


async def test_no_loopd_exits_3_before_saying_anything_about_a_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await run_chat(args(tmp_path, "--session", "s1", "--say", "Hi"), {})
    captured = capsys.readouterr()
    assert (code, captured.out) == (3, "")
    assert captured.err == (
        f"error: no loopd is listening on {tmp_path / 'loop.sock'}; "
        "start it with `loopd serve --config <file>`\n"
    )
    as_json = await run_chat(args(tmp_path, "--json", "--session", "s1"), {})
    captured = capsys.readouterr()
    assert (as_json, captured.err) == (3, "")
    [line] = lines(captured.out)
    assert line["kind"] == "error"
    assert line["body"]["code"] == "no_loopd"  # type: ignore[index]


async def test_loopd_gone_mid_turn_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_loopd(tmp_path, [[*events("Half")]]):  # then it closes, no final frame
        code = await run_chat(args(tmp_path, "--json", "--session", "s1", "--say", "Hi"), {})
    assert code == 4
    last = lines(capsys.readouterr().out)[-1]
    assert (last["kind"], last["body"]["code"]) == ("error", "connection_lost")  # type: ignore[index]


async def test_a_message_over_one_frame_is_refused_without_a_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with fake_loopd(tmp_path, []) as loopd:
        code = await run_chat(args(tmp_path, "--session", "s1", "--say", "x" * 1_100_000), {})
    assert code == 5
    assert "loopd takes at most 1,048,576" in capsys.readouterr().err
    assert loopd.turns == []


async def test_a_bad_session_id_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await run_chat(args(tmp_path, "--session", "../etc", "--say", "Hi"), {})
    assert code == 2
    assert capsys.readouterr().err == (
        "error: session id '../etc' has a '/'; allowed: letters, digits, '.', '_', '-'\n"
    )


async def test_piped_input_runs_a_turn_per_line_and_a_block_as_one_and_answers_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    typed = 'one\n\n/help\n/nope\n//slash\n"""\ntwo\nthree\n"""\n/stats\n/new\nfour\n/quit\nfive\n'
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    answers: list[Answer] = [[p.TurnDoneFrame(t, USAGE)] for t in ("1", "2", "3", "4")]
    async with fake_loopd(tmp_path, answers) as loopd:
        code = await run_chat(args(tmp_path, "--session", "s1"), {})
    out = capsys.readouterr().out
    assert code == 0
    assert [t.content for t in loopd.turns] == ["one", "/slash", "two\nthree", "four"]
    assert [t.session.value for t in loopd.turns][:3] == ["s1"] * 3
    assert loopd.turns[3].session.value.startswith("chat-")  # /new
    assert loopd.turns[3].resume is False
    assert "Commands:\n  /help" in out
    assert "/nope is not a command: /help lists them" in out
    assert "prompt: 15 tokens, 10 reused from the cache (66%), 5 processed" in out
    assert f"session {loopd.turns[3].session}\n" in out


async def test_piped_input_exits_with_the_first_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\nc\n"))
    full = p.WireError(p.ErrorCode.SESSION_FULL, "full")
    limit = p.WireError(p.ErrorCode.TURN_LIMIT, "looped")
    answers: list[Answer] = [[p.TurnDoneFrame("ok", USAGE)], [full], [limit]]
    async with fake_loopd(tmp_path, answers) as loopd:
        code = await run_chat(args(tmp_path), {})
    assert (code, len(loopd.turns)) == (EXIT_CODES[p.ErrorCode.SESSION_FULL], 3)
    assert capsys.readouterr().err.count("error: ") == 2


class Screen(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_the_status_line_is_redrawn_on_a_timer_between_progress_events(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    progress = p.TurnEventFrame(p.Progress(total=4096, cache=0, processed=2048))
    answer: Answer = [progress, 2.0, *events("Hi"), p.TurnDoneFrame("Hi", USAGE)]
    screen = Screen()
    renderer = Renderer(tty=True, color=False, unicode=False)
    chat = Chat(tmp_path / "loop.sock", p.SessionId("s1"), resume=True, thinking=True,
                mode="stream", out=screen, err=io.StringIO(), renderer=renderer)  # fmt: skip
    async with fake_loopd(tmp_path, [answer]):
        with deadline(10, "the turn"):
            assert await chat.turn("Hello") == 0
    drawn = screen.getvalue().split(CLEAR_LINE)
    status = [line for line in drawn if "prompt 2048 of 4096" in line]
    assert len(status) >= 15  # 2 s between two frames, redrawn every 0.1 s
    assert len({line[0] for line in status}) == 4  # the spinner turned
    assert status[-1].endswith(("- 1.9 s", "- 2.0 s"))  # the last tick, or the one at 2 s
    assert drawn[-1] == "Hi\n"  # the line went before the answer began
    assert chat.figures is not None
    assert (chat.figures.seconds, chat.figures.first_text) == (2.0, 2.0)


def test_new_session_ids_come_from_the_time_and_a_random_suffix() -> None:
    from datetime import UTC, datetime

    one = new_session_id(datetime(2026, 11, 29, 21, 31, 34, tzinfo=UTC)).value
    assert one.startswith("chat-20261129-213134-")
    assert len(one) == len("chat-20261129-213134-") + 4
    assert new_session_id().value != new_session_id().value


def test_the_socket_defaults_to_boxmaker_home() -> None:
    from boxmaker.cli.chat_command import default_socket

    assert default_socket({"BOXMAKER_HOME": "/h"}) == Path("/h/run/loop/loop.sock")
    assert default_socket({}) == Path("/var/lib/boxmaker/run/loop/loop.sock")


async def test_new_epoch_goes_with_the_next_turn_frame_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    done: Answer = [p.TurnDoneFrame("Ok.", USAGE)]
    async with fake_loopd(tmp_path, [done, done, done]) as loopd:
        code = await run_chat(args(tmp_path, "--session", "s1", "--new-epoch", "--say", "Hi"), {})
        assert code == 0
        monkeypatch.setattr("sys.stdin", io.StringIO("/new-epoch\nAfresh.\nAnd on.\n"))
        assert await run_chat(args(tmp_path, "--session", "s1"), {}) == 0
    assert [(t.content, t.new_epoch) for t in loopd.turns] == [
        ("Hi", True), ("Afresh.", True), ("And on.", False),
    ]  # fmt: skip
    assert "[the next message opens a new epoch" in capsys.readouterr().out
