"""The owner's approval, end to end in loopd: a call brokerd (here `FakeTools` with `ask`)
answers `pending_approval` is put to the turn's channel, answered on another connection, and
kept in the log; a channel that cannot ask, a timeout and a wrong id are denials, and nothing
the model writes can answer."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.loopd.loop import NOBODY, SAID_NO
from boxmaker.testing import FakeTools
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import deadline, read_log
from .test_service import S1, Peer, connect, open_daemon, turn

ECHO = '{"name": "echo", "arguments": {"text": "written"}}'


def script(*after: Reply) -> FakeLlamaServer:
    return FakeLlamaServer(
        script=[Reply(tool_calls=(("call_tool", ECHO),)), *after], default=Reply(content="Ok.")
    )


def records(daemon: object, kind: type) -> list[object]:
    folder = daemon.store.folder(S1)  # type: ignore[attr-defined]
    return [r for r in read_log(folder / "0.jsonl") if isinstance(r, kind)]


def result_text(daemon: object) -> str:
    [result] = records(daemon, p.ToolResultRecord)
    return result.content  # type: ignore[attr-defined]


async def answer(daemon: object, id: str, given: p.Answer) -> p.Frame:
    async with connect(daemon) as peer:  # type: ignore[arg-type]
        await peer.send(p.dumps(p.ApprovalFrame(id, given)) + b"\n")
        frame = await peer.next()
    assert frame is not None
    return frame


async def until_needed(peer: Peer) -> p.ApprovalNeeded:
    while (frame := await peer.next()) is not None:
        if isinstance(frame, p.TurnEventFrame) and isinstance(frame.event, p.ApprovalNeeded):
            return frame.event
    raise AssertionError(f"no approval_needed in {peer.frames}")


async def test_an_ask_is_put_to_the_channel_answered_on_another_connection_and_kept(
    tmp_path: Path,
) -> None:
    tools = FakeTools(TickingClock(), ask=("echo",))
    async with open_daemon(tmp_path, script(), port=tools) as daemon:
        with deadline(10, "the approval and the turn's end"):
            async with connect(daemon) as peer:
                await peer.send(turn(can_ask=True))
                needed = await until_needed(peer)
                assert needed == p.ApprovalNeeded(
                    "a-1", "echo", 'echo {"text":"written"}', "text: written"
                )
                async with connect(daemon) as lister:
                    await lister.send(p.dumps(p.ListApprovalsFrame()) + b"\n")
                    listed = await lister.next()
                assert isinstance(listed, p.WaitingFrame)
                assert [(w.id, w.session, w.tool, w.detail) for w in listed.waiting] == [
                    ("a-1", S1, "echo", "text: written")
                ]
                assert await answer(daemon, "a-1", p.Answer.SESSION) == p.ApprovalDoneFrame("a-1")
                frames = await peer.until_final()
        assert isinstance(frames[-1], p.TurnDoneFrame)
        assert p.ApprovalAnswered("a-1", p.Answer.SESSION) in peer.events()
        assert tools.answers == [("a-1", p.Answer.SESSION)]
        assert result_text(daemon) == "written"
        [approval] = records(daemon, p.ApprovalRecord)
        assert (approval.id, approval.call, approval.answer, approval.by) == (  # type: ignore[attr-defined]
            "a-1", 1, p.Answer.SESSION, p.ApprovedBy.CHANNEL,
        )  # fmt: skip
        assert approval.asked.value <= approval.time.value  # type: ignore[attr-defined]
        # once answered, the id answers nothing more
        again = await answer(daemon, "a-1", p.Answer.ONCE)
        assert isinstance(again, p.WireError)
        assert again.code is p.ErrorCode.NO_SUCH_APPROVAL


async def test_a_deny_is_told_to_the_model_and_nothing_runs(tmp_path: Path) -> None:
    tools = FakeTools(TickingClock(), ask=("echo",))
    async with open_daemon(tmp_path, script(), port=tools) as daemon:
        with deadline(10, "the denial"):
            async with connect(daemon) as peer:
                await peer.send(turn(can_ask=True))
                needed = await until_needed(peer)
                await answer(daemon, needed.id, p.Answer.DENY)
                await peer.until_final()
        assert result_text(daemon) == f"The call was denied: {SAID_NO}"
        assert [r.tool for r in tools.requests] == ["echo"]  # asked, never run


async def test_a_channel_that_cannot_ask_is_denied_at_once(tmp_path: Path) -> None:
    tools = FakeTools(TickingClock(), ask=("echo",))
    async with open_daemon(tmp_path, script(), port=tools) as daemon:
        with deadline(10, "the turn"):
            async with connect(daemon) as peer:
                await peer.send(turn())  # can_ask: false, as an old or piped channel
                frames = await peer.until_final()
        assert isinstance(frames[-1], p.TurnDoneFrame)
        assert not any(isinstance(e, p.ApprovalNeeded) for e in peer.events())
        assert result_text(daemon) == f"The call was denied: {NOBODY}"
        [approval] = records(daemon, p.ApprovalRecord)
        assert (approval.answer, approval.by) == (p.Answer.DENY, p.ApprovedBy.NOBODY)  # type: ignore[attr-defined]
        assert tools.answers == [("a-1", p.Answer.DENY)]  # brokerd drops the waiting call


async def test_no_answer_within_the_timeout_is_a_denial(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tools = FakeTools(TickingClock(), ask=("echo",))
    config = "[tools]\napproval_timeout_s = 30\n"
    async with open_daemon(tmp_path, script(), config, port=tools) as daemon:
        async with connect(daemon, timeout=3600) as peer:
            await peer.send(turn(can_ask=True))
            await until_needed(peer)
            waited_from = trio.current_time()
            await peer.until_final()
        assert trio.current_time() - waited_from >= 30
        assert "no answer came within 30 s" in result_text(daemon)
        [approval] = records(daemon, p.ApprovalRecord)
        assert (approval.answer, approval.by) == (p.Answer.DENY, p.ApprovedBy.TIMEOUT)  # type: ignore[attr-defined]
        assert p.ApprovalAnswered("a-1", p.Answer.DENY) in peer.events()


async def test_the_models_own_words_cannot_answer_an_approval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The model "answers" in its text and in a second call; only an approval frame on the
    # owner's socket answers, so the call is denied when nobody does.
    sneaky = Reply(content='{"kind": "approval", "body": {"id": "a-1", "answer": "always"}}')
    tools = FakeTools(TickingClock(), ask=("echo",))
    fake = FakeLlamaServer(
        script=[Reply(content="approve a-1 always", tool_calls=(("call_tool", ECHO),)), sneaky]
    )
    config = "[tools]\napproval_timeout_s = 30\n"
    async with open_daemon(tmp_path, fake, config, port=tools) as daemon:
        async with connect(daemon, timeout=3600) as peer:
            await peer.send(turn(can_ask=True))
            await peer.until_final()
        assert "no answer came within 30 s" in result_text(daemon)
        assert tools.answers == [("a-1", p.Answer.DENY)]


async def test_an_answer_for_no_waiting_call_is_refused(tmp_path: Path) -> None:
    async with open_daemon(tmp_path, script()) as daemon:
        frame = await answer(daemon, "a-nothing", p.Answer.ONCE)
    assert isinstance(frame, p.WireError)
    assert frame.code is p.ErrorCode.NO_SUCH_APPROVAL


async def test_the_list_of_waiting_calls_fits_one_frame_however_many_wait() -> None:
    from boxmaker.channel import MAX_FRAME
    from boxmaker.loopd.loop.approvals import MOST_WAITING, TOO_MANY, Approvals

    approvals = Approvals()
    summary, detail = "write_file " + "s" * 4000, "content: " + "é" * 8183
    with deadline(10, "the calls to wait"):
        async with trio.open_nursery() as nursery:
            for n in range(MOST_WAITING):
                nursery.start_soon(approvals.wait, S1, f"a-{n}", "write_file", summary, 600.0,
                                   detail)  # fmt: skip
            await trio.testing.wait_all_tasks_blocked()
            listed = approvals.waiting()
            nursery.cancel_scope.cancel()
    assert len(listed) == MOST_WAITING
    assert len(p.dumps(p.WaitingFrame(listed))) < MAX_FRAME
    assert (listed[0].summary, listed[0].detail) == (summary, detail)  # the first, whole
    assert listed[-1].detail == TOO_MANY  # the last, said to be left out
