"""bxctl chat against a fake loopd: --json, --say, resume or create, errors as one line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from boxmaker import proto as p
from boxmaker.channel import FrameDecoder, encode_frame
from boxmaker.channel.codec import NEED_DATA
from boxmaker.cli.bxctl import Chat, build_parser, interactive, new_session_id, run_chat
from boxmaker.daemon import open_unix_listener

USAGE = p.Usage(cache_n=10, prompt_n=5, predicted_n=3, reasoning_tokens=0, thinking_capped=False)


class FakeLoopd:
    """Answers each turn frame with the next scripted list of frames."""

    def __init__(self, answers: list[list[p.Frame]]) -> None:
        self.answers = answers
        self.turns: list[p.TurnFrame] = []

    async def handle(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        while (frame := decoder.next_frame()) is NEED_DATA:
            decoder.receive_data(await stream.receive_some())
        assert isinstance(frame, p.TurnFrame)
        self.turns.append(frame)
        await stream.send_all(b"".join(encode_frame(f) for f in self.answers.pop(0)))
        await stream.aclose()


@asynccontextmanager
async def fake_loopd(tmp_path: Path, answers: list[list[p.Frame]]) -> AsyncIterator[FakeLoopd]:
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


async def test_json_prints_every_frame_body_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = [*events("Hel", "lo."), p.TurnDoneFrame("Hello.", USAGE)]
    async with fake_loopd(tmp_path, [answer]) as loopd:
        code = await run_chat(args(tmp_path, "--json", "--session", "s1", "--say", "Hi"), {})
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert [json.loads(line) for line in out] == [
        {"session": "s1"},
        {"event": {"type": "content", "text": "Hel"}},
        {"event": {"type": "content", "text": "lo."}},
        {"content": "Hello.", "usage": p.unstructure(USAGE)},
    ]
    assert loopd.turns == [p.TurnFrame(p.SessionId("s1"), "Hi", resume=True, thinking=True)]


async def test_say_prints_only_the_answer_and_exits_0(
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


async def test_say_with_an_error_prints_one_line_on_stderr_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = p.WireError(p.ErrorCode.SESSION_BUSY, "session s1 is already in a turn")
    async with fake_loopd(tmp_path, [[busy]]):
        code = await run_chat(args(tmp_path, "--session", "s1", "--say", "Hi"), {})
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    assert captured.err == "session s1\nerror: session_busy: session s1 is already in a turn\n"


async def test_a_named_session_that_does_not_exist_yet_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = p.WireError(p.ErrorCode.NO_SUCH_SESSION, "no session s9")
    async with fake_loopd(tmp_path, [[missing], [p.TurnDoneFrame("New.", USAGE)]]) as loopd:
        code = await run_chat(args(tmp_path, "--session", "s9", "--say", "Hi"), {})
    assert (code, capsys.readouterr().out) == (0, "New.\n")
    assert [t.resume for t in loopd.turns] == [True, False]


async def test_no_loopd_on_the_socket_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await run_chat(args(tmp_path, "--session", "s1", "--say", "Hi"), {})
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert err[-1] == (
        f"error: no loopd is listening on {tmp_path / 'loop.sock'}; "
        "start it with `loopd serve --config <file>`"
    )


async def test_a_bad_session_id_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await run_chat(args(tmp_path, "--session", "../etc", "--say", "Hi"), {})
    assert code == 1
    assert capsys.readouterr().err == (
        "error: session id '../etc' has a '/'; allowed: letters, digits, '.', '_', '-'\n"
    )


def test_new_session_ids_come_from_the_time_and_a_random_suffix() -> None:
    from datetime import UTC, datetime

    one = new_session_id(datetime(2026, 11, 29, 21, 31, 34, tzinfo=UTC)).value
    assert one.startswith("chat-20261129-213134-")
    assert len(one) == len("chat-20261129-213134-") + 4
    assert new_session_id().value != new_session_id().value


def test_the_socket_defaults_to_boxmaker_home() -> None:
    from boxmaker.cli.bxctl import default_socket

    assert default_socket({"BOXMAKER_HOME": "/h"}) == Path("/h/run/loop/loop.sock")
    assert default_socket({}) == Path("/var/lib/boxmaker/run/loop/loop.sock")


async def test_new_epoch_goes_with_the_next_turn_frame_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = [p.TurnDoneFrame("Ok.", USAGE)]
    async with fake_loopd(tmp_path, [done, done, done]) as loopd:
        code = await run_chat(args(tmp_path, "--session", "s1", "--new-epoch", "--say", "Hi"), {})
        assert code == 0
        chat = Chat(tmp_path / "loop.sock", p.SessionId("s1"), resume=True, thinking=True,
                    mode="stream", out=sys.stdout, err=sys.stderr)  # fmt: skip
        lines = iter(["/new-epoch\n", "Afresh.\n", "And on.\n", ""])
        await interactive(chat, lambda: next(lines))
    assert [(t.content, t.new_epoch) for t in loopd.turns] == [
        ("Hi", True), ("Afresh.", True), ("And on.", False),
    ]  # fmt: skip
    assert "[the next message opens a new epoch" in capsys.readouterr().err
