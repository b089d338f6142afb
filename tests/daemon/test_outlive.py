"""Turns that outlive their channel (issue 43), in a real Daemon over memory streams against
the fake: a detached turn runs on when its channel leaves, and so does a detached message
waiting for it; a watch hears every turn of its sessions, whoever started it, and can answer
a detached turn's approval; a slow watcher is dropped and nothing is cancelled; an origin the
session has is answered `duplicate` and nothing runs (in the log, running, in the mailbox,
after a restart, with its index lost); `stop` stops a turn, detached or not."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.channel import LoopdConnection, encode_frame
from boxmaker.clock import TickingClock
from boxmaker.layout import ORIGINS
from boxmaker.loopd import service
from boxmaker.loopd.mailbox import Mailbox
from boxmaker.loopd.outbox import MAX_QUEUED, Outbox
from boxmaker.loopd.recovery import close_interrupted
from boxmaker.loopd.serve import handle_connection
from boxmaker.loopd.service import Daemon
from boxmaker.loopd.watchers import MAX_SILENT, MAX_WATCHES, Watch, Watchers
from boxmaker.store import FileSystem
from boxmaker.testing import FakeTools
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply

from ..helpers import deadline, read_log
from .test_mailbox import assert_verified, users
from .test_service import S1, Peer, connect, open_daemon, turn

M1 = p.Origin("matrix", "$event-1")
M2 = p.Origin("matrix", "$event-2")
ECHO = '{"name": "echo", "arguments": {"text": "written"}}'


@asynccontextmanager
async def serving(home: Path, fake: FakeLlamaServer, **kw: Any) -> AsyncIterator[Daemon]:
    """A daemon with its service running (the nursery detached turns run in)."""
    async with open_daemon(home, fake, **kw) as daemon, trio.open_nursery() as nursery:
        await nursery.start(daemon.serve)
        yield daemon
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def watcher(
    daemon: Daemon, can_ask: bool = False, session: p.SessionId = S1
) -> AsyncIterator[Peer]:
    """A watch of `session`, in place (its `watching` read), closed on the way out."""
    async with connect(daemon) as peer:
        await peer.send(watch(session, can_ask=can_ask))
        assert await peer.next() == p.WatchingFrame((session,))
        yield peer
        await peer.stream.aclose()


def frame(message: p.Frame) -> bytes:
    return encode_frame(message)


def watch(*sessions: p.SessionId, can_ask: bool = False) -> bytes:
    return frame(p.WatchFrame(sessions or (S1,), can_ask=can_ask))


async def heard(peer: Peer) -> list[p.Frame]:
    """A watcher's frames up to (and with) the final frame of the turn it hears."""
    inner: list[p.Frame] = []
    while (got := await peer.next()) is not None:
        assert isinstance(got, p.WatchEventFrame), got
        inner.append(got.frame)
        if isinstance(got.frame, p.TurnDoneFrame | p.WireError):
            return inner
    raise AssertionError(f"the watch ended: {peer.frames}")


def outcomes(daemon: Daemon, session: p.SessionId = S1) -> list[str]:
    log = read_log(daemon.store.folder(session) / "0.jsonl")
    return [r.outcome.value for r in log if isinstance(r, p.TurnEndRecord)]


async def test_a_detached_turn_and_its_queued_successor_run_on_after_their_channels_leave(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="First."), Reply(content="Second.")])
    async with serving(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as first, connect(daemon) as second:
            await first.send(turn(content="One.", detach=True))
            assert await first.next() == p.TurnEventFrame(p.Waiting(slot_busy=0))
            await second.send(turn(resume=True, content="Two.", detach=True))
            assert await second.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            await first.stream.aclose()  # both channels leave
            await second.stream.aclose()
        assert daemon.busy(S1)
        async with watcher(daemon) as listening:
            fake.release(0)
            with deadline(10, "both detached turns' ends"):
                first_turn, second_turn = await heard(listening), await heard(listening)
        assert isinstance(first_turn[-1], p.TurnDoneFrame)
        assert first_turn[-1].content == "First."
        assert second_turn[0] == p.TurnFrame(S1, "Two.", resume=True, detach=True)
        assert isinstance(second_turn[-1], p.TurnDoneFrame)
        assert second_turn[-1].content == "Second."
        assert users(daemon) == ["One.", "Two."]
        assert outcomes(daemon) == ["done", "done"]
        assert_verified(daemon)


async def test_a_plain_turn_is_still_cancelled_when_its_channel_leaves(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Never."))
    async with serving(tmp_path, fake) as daemon, watcher(daemon) as listening:
        fake.hold(0)
        async with connect(daemon) as peer:
            await peer.send(turn(content="One."))
            await peer.next()
            await peer.stream.aclose()
        with deadline(10, "the cancelled turn's end"):
            heard_turn = await heard(listening)
        assert isinstance(heard_turn[-1], p.WireError)
        assert heard_turn[-1].code is p.ErrorCode.CANCELLED
        assert outcomes(daemon) == ["cancelled"]


async def test_a_watch_hears_a_turn_from_its_turn_frame_to_its_final_and_answers_its_ask(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(tool_calls=(("call_tool", ECHO),))],
                           default=Reply(content="Done."))  # fmt: skip
    tools = FakeTools(TickingClock(), ask=("echo",))
    async with serving(tmp_path, fake, port=tools) as daemon:
        async with watcher(daemon, can_ask=True) as listening:
            fake.hold(0)  # the question comes once its channel has left
            async with connect(daemon) as peer:
                sent = p.TurnFrame(S1, "Write it.", resume=False, detach=True, origin=M1)
                await peer.send(frame(sent))
                await peer.next()
                await peer.stream.aclose()
            await trio.testing.wait_all_tasks_blocked()
            fake.release(0)
            with deadline(10, "the question, the answer and the turn's end"):
                first = await listening.next()
                assert first == p.WatchEventFrame(S1, M1, sent)
                while True:
                    got = await listening.next()
                    assert isinstance(got, p.WatchEventFrame)
                    assert got.origin == M1
                    if isinstance(got.frame, p.TurnEventFrame) and isinstance(
                        got.frame.event, p.ApprovalNeeded
                    ):
                        break
                async with connect(daemon) as answering:
                    await answering.send(frame(p.ApprovalFrame("a-1", p.Answer.ONCE)))
                    assert await answering.next() == p.ApprovalDoneFrame("a-1")
                rest = await heard(listening)
        assert isinstance(rest[-1], p.TurnDoneFrame)
        assert rest[-1].content == "Done."
        assert tools.answers == [("a-1", p.Answer.ONCE)]
        [approval] = [r for r in read_log(daemon.store.folder(S1) / "0.jsonl")
                      if isinstance(r, p.ApprovalRecord)]  # fmt: skip
        assert approval.by is p.ApprovedBy.CHANNEL


async def test_a_watcher_that_cannot_ask_leaves_a_gone_channel_s_call_denied(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(tool_calls=(("call_tool", ECHO),))],
                           default=Reply(content="Denied, then."))  # fmt: skip
    tools = FakeTools(TickingClock(), ask=("echo",))
    async with serving(tmp_path, fake, port=tools) as daemon:
        async with watcher(daemon) as listening:
            fake.hold(0)  # the call comes once its channel has left
            async with connect(daemon) as peer:
                await peer.send(turn(content="Write it.", detach=True, can_ask=True))
                await peer.next()
                await peer.stream.aclose()
            await trio.testing.wait_all_tasks_blocked()
            fake.release(0)
            with deadline(10, "the turn's end"):
                frames = await heard(listening)
        assert not [f for f in frames if isinstance(f, p.TurnEventFrame)
                    and isinstance(f.event, p.ApprovalNeeded)]  # fmt: skip
        assert tools.answers == [("a-1", p.Answer.DENY)]


async def test_a_watcher_that_takes_nothing_is_dropped_and_the_turn_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    long = " ".join(str(n) for n in range(4000))
    fake = FakeLlamaServer(script=[Reply(content="Made."), Reply(content=long)])
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Hello."))
        client, server = trio.testing.lockstep_stream_pair()  # a write waits for a read
        answer: list[p.Frame] = []

        async def say_a_lot() -> None:
            answer.extend(await one(daemon, turn(resume=True, content="Say a lot.")))

        with deadline(60, "the watcher's drop and the turn's end"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(handle_connection, server, daemon, 30.0)
                await client.send_all(watch())
                await trio.testing.wait_all_tasks_blocked()
                assert len(daemon.watchers) == 1
                nursery.start_soon(say_a_lot)
            # Both are over: the watch's connection ended (dropped), and the turn answered.
        assert len(daemon.watchers) == 0
        assert isinstance(answer[-1], p.TurnDoneFrame)
        assert long.startswith(answer[-1].content)  # as far as the fake's max_tokens
        assert outcomes(daemon) == ["done", "done"]


async def one(daemon: Daemon, data: bytes) -> list[p.Frame]:
    async with connect(daemon) as peer:
        await peer.send(data)
        return await peer.until_final()


async def test_past_sixteen_watches_a_watch_is_refused_and_four_are_kept_for_askers(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, FakeLlamaServer()) as daemon, trio.open_nursery() as nursery:
        peers = []

        async def open_watch(can_ask: bool) -> list[p.Frame]:
            client, server = trio.testing.memory_stream_pair()
            nursery.start_soon(handle_connection, server, daemon, 30.0)
            peers.append(Peer(client))
            await peers[-1].send(watch(can_ask=can_ask))
            return [await peers[-1].next()]  # type: ignore[list-item]

        for _ in range(MAX_SILENT):
            assert await open_watch(False) == [p.WatchingFrame((S1,))]
        refused = await open_watch(False)
        assert refused[-1].code is p.ErrorCode.TOO_MANY_WATCHES  # type: ignore[union-attr]
        for _ in range(MAX_WATCHES - MAX_SILENT):
            assert await open_watch(True) == [p.WatchingFrame((S1,))]
        refused = await open_watch(True)
        assert refused[-1].code is p.ErrorCode.TOO_MANY_WATCHES  # type: ignore[union-attr]
        assert len(daemon.watchers) == MAX_WATCHES
        for peer in peers:
            await peer.stream.aclose()


async def test_an_origin_the_session_has_gets_duplicate_and_nothing_runs(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content="Once.")], default=Reply(content="Again?"))
    async with serving(tmp_path, fake) as daemon:
        sent = p.TurnFrame(S1, "Do it once.", resume=False, origin=M1)
        assert (await one(daemon, frame(sent)))[-1].content == "Once."  # type: ignore[union-attr]
        again = p.TurnFrame(S1, "Do it once.", resume=True, origin=M1)
        assert await one(daemon, frame(again)) == [p.DuplicateFrame(M1, "done", "Once.")]
        assert fake.completed == 1
    records = read_log(tmp_path / "sessions" / "s1" / "0.jsonl")
    assert [r.origin for r in records if isinstance(r, p.UserRecord)] == [M1]
    (tmp_path / "sessions" / "s1" / ORIGINS).unlink()  # lost: built again from the log
    async with serving(tmp_path, fake) as daemon:  # loopd started again
        assert await one(daemon, frame(again)) == [p.DuplicateFrame(M1, "done", "Once.")]
        other = p.TurnFrame(S1, "Another.", resume=True, origin=M2)
        assert (await one(daemon, frame(other)))[-1].content == "Again?"  # type: ignore[union-attr]
        assert await one(daemon, frame(again)) == [p.DuplicateFrame(M1, "done", "Once.")]
    index = (tmp_path / "sessions" / "s1" / ORIGINS).read_text().splitlines()
    ids = [json.loads(line).get("id") for line in index if '"id"' in line]
    assert ids == ["$event-1", "$event-2"]
    assert fake.completed == 2


async def test_an_origin_running_or_waiting_gets_duplicate_and_nothing_more_runs(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Ok."))
    async with serving(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as first, connect(daemon) as second:
            await first.send(frame(p.TurnFrame(S1, "One.", resume=False, origin=M1)))
            await first.next()
            await second.send(frame(p.TurnFrame(S1, "Two.", resume=True, origin=M2)))
            assert await second.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            for origin, where in ((M1, "running"), (M2, "waiting")):
                again = p.TurnFrame(S1, "Again.", resume=True, origin=origin)
                assert await one(daemon, frame(again)) == [p.DuplicateFrame(origin, where)]
            fake.release(0)
            with deadline(10, "both turns"):
                await first.until_final()
                await second.until_final()
        assert users(daemon) == ["One.", "Two."]
        again = p.TurnFrame(S1, "Again.", resume=True, origin=M2)
        assert await one(daemon, frame(again)) == [p.DuplicateFrame(M2, "done", "Ok.")]


async def test_stop_stops_a_detached_turn_and_nothing_runs_in_its_place(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="Hi.")], default=Reply(content="Never."))
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Hello."))
        assert await one(daemon, frame(p.StopFrame(S1))) == [p.StoppedFrame(S1, False)]
        fake.hold(0)
        async with connect(daemon) as peer:
            await peer.send(turn(resume=True, content="Go on.", detach=True, origin=M1))
            await peer.next()
            await peer.stream.aclose()
        async with watcher(daemon) as listening:
            assert await one(daemon, frame(p.StopFrame(S1))) == [p.StoppedFrame(S1, True)]
            with deadline(10, "the stopped turn's end"):
                stopped = await heard(listening)
        assert isinstance(stopped[-1], p.WireError)
        assert stopped[-1].code is p.ErrorCode.STOPPED
        fake.release(0)
        assert outcomes(daemon) == ["done", "stopped"]
        cut = read_log(daemon.store.folder(S1) / "0.jsonl")[-2]
        assert isinstance(cut, p.BreakRecord)
        assert cut.hard
        again = p.TurnFrame(S1, "Go on.", resume=True, origin=M1)
        assert await one(daemon, frame(again)) == [p.DuplicateFrame(M1, "stopped")]
        assert_verified(daemon)


async def test_a_turn_left_unfinished_is_closed_as_interrupted_and_a_watch_is_told(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Hi."))
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, frame(p.TurnFrame(S1, "One.", resume=False)))
    log = tmp_path / "sessions" / "s1" / "0.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    # What a kill mid-turn leaves: the turn's user record (and its first completion), no end.
    async with serving(tmp_path, fake) as daemon:
        session = await daemon.sessions.get(S1, resume=True)
        session.append(p.UserRecord(session.records[0].time, "Two.", M2))
        daemon.close()
    assert len(log.read_bytes().splitlines()) == len(lines) + 1
    store = daemon.store
    closed = close_interrupted(store, TickingClock().now)
    assert [(c.session, c.origin) for c in closed] == [(S1, M2)]
    assert close_interrupted(store, TickingClock().now) == []  # once
    async with serving(tmp_path, fake) as daemon:
        daemon.interrupted = {c.session: c.origin for c in closed}
        assert outcomes(daemon) == ["done", "interrupted"]
        async with watcher(daemon) as listening:
            told = await listening.next()
        assert isinstance(told, p.WatchEventFrame)
        assert told.origin == M2
        assert isinstance(told.frame, p.WireError)
        assert told.frame.code is p.ErrorCode.INTERRUPTED
        again = p.TurnFrame(S1, "Two.", resume=True, origin=M2)
        assert await one(daemon, frame(again)) == [p.DuplicateFrame(M2, "interrupted")]
        assert_verified(daemon)


async def test_an_origin_whose_turn_ends_while_its_duplicate_is_checked_is_still_once(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Ok."))
    gate = threading.Event()
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Made."))
        fake.hold(0)
        async with connect(daemon) as first, connect(daemon) as second, connect(daemon) as dup:
            await first.send(turn(resume=True, content="Zero."))
            await first.next()
            await second.send(frame(p.TurnFrame(S1, "One.", resume=True, origin=M1)))
            assert await second.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            index = daemon.origins._book(S1).index
            read = index.refresh

            def read_then_wait() -> None:  # the log is read before M1's turn writes anything
                read()
                gate.wait(10)

            index.refresh = read_then_wait  # type: ignore[method-assign]
            await dup.send(frame(p.TurnFrame(S1, "One.", resume=True, origin=M1)))
            await trio.testing.wait_all_tasks_blocked()
            fake.release(0)
            with deadline(10, "both turns"):
                await first.until_final()
                assert (await second.until_final())[-1].content == "Ok."  # type: ignore[union-attr]
            gate.set()  # now the check: M1's turn ended meanwhile
            with deadline(10, "the duplicate's answer"):
                assert await dup.until_final() == [p.DuplicateFrame(M1, "done", "Ok.")]
        assert users(daemon) == ["Made.", "Zero.", "One."]


def test_a_watcher_that_lets_4_mib_wait_is_dropped_at_once() -> None:
    connection = LoopdConnection()
    connection.receive_data(watch())
    assert isinstance(connection.next_event(), p.WatchFrame)
    scope = trio.CancelScope()
    _client, server = trio.testing.memory_stream_pair()
    outbox = Outbox(server, connection, 30.0, scope, "watch")
    watchers = Watchers()
    assert watchers.add(Watch((S1,), True, outbox))
    piece = p.TurnEventFrame(p.Content("x" * 60_000))
    while not outbox.dropped:
        watchers.publish(S1, M1, piece)
    assert scope.cancel_called
    assert outbox.queued > MAX_QUEUED
    assert not watchers.can_ask(S1)  # a dropped watcher answers nothing
    before = outbox.queued
    watchers.publish(S1, M1, piece)
    assert outbox.queued == before  # nothing more is kept for it


async def test_a_session_removed_and_made_again_has_none_of_the_old_origins(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Ok."))
    async with serving(tmp_path, fake) as daemon:
        sent = frame(p.TurnFrame(S1, "Once.", resume=False, origin=M1))
        assert isinstance((await one(daemon, sent))[-1], p.TurnDoneFrame)
        daemon.sessions.drop(S1)
        FileSystem().remove_tree(daemon.store.folder(S1))  # as bxctl rm does
        assert isinstance((await one(daemon, sent))[-1], p.TurnDoneFrame)
        assert users(daemon) == ["Once."]
        assert fake.completed == 2


async def test_a_watcher_that_sends_anything_is_refused_and_no_turn_is_touched(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Hello."))
        fake.hold(0)
        async with connect(daemon) as watching_peer, connect(daemon) as peer:
            await watching_peer.send(watch())
            assert await watching_peer.next() == p.WatchingFrame((S1,))
            await peer.send(turn(resume=True, content="Go on."))
            await peer.next()
            await watching_peer.send(b"one byte too many\n")  # and it reads nothing more
            await trio.testing.wait_all_tasks_blocked()
            assert len(daemon.watchers) == 0  # it hears nothing more at once
            fake.release(0)
            with deadline(10, "the turn's end"):
                assert isinstance((await peer.until_final())[-1], p.TurnDoneFrame)
            await watching_peer.stream.aclose()
        assert not daemon.busy(S1)
        assert isinstance((await one(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)


async def test_while_loopd_stops_a_detached_turn_runs_in_its_grace_and_its_watch_hears_it(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done in time."))
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Hello."))
        fake.hold(0)
        async with connect(daemon) as listening:
            await listening.send(watch())
            assert await listening.next() == p.WatchingFrame((S1,))
            async with connect(daemon) as peer:
                await peer.send(turn(resume=True, content="Finish it.", detach=True))
                await peer.next()
                await peer.stream.aclose()
            daemon.stop(grace=30)
            async with connect(daemon) as late:
                await late.send(turn(resume=True, content="Late.", detach=True))
                assert await late.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
                fake.release(0)
                with deadline(10, "the turns' ends and the watch's"):
                    answer = (await late.until_final())[-1]
                    await daemon.quiet.wait()
                    frames = []
                    while (got := await listening.next()) is not None:
                        frames.append(got)
        assert isinstance(answer, p.TurnDoneFrame)  # run as its channel's own: it stayed
        finals = [f.frame for f in frames if isinstance(f, p.WatchEventFrame)
                  and isinstance(f.frame, p.TurnDoneFrame)]  # fmt: skip
        assert len(finals) == 2  # the watch ended only once both were told
        assert outcomes(daemon) == ["done", "done", "done"]


async def test_a_stop_never_relabels_a_turn_a_hard_break_stopped(tmp_path: Path) -> None:
    async with serving(tmp_path, FakeLlamaServer()) as daemon:
        box = Mailbox(S1, daemon.watchers)
        running = box.hold(p.TurnFrame(S1, "Long job.", resume=True), lambda _event: None)
        daemon._boxes[S1] = box
        running.break_hard()  # its message waits to run next
        assert daemon.stop_turn(S1)
        assert not running.stopped  # the turn ends `break_hard`, and the message runs
        del daemon._boxes[S1]


def test_an_event_too_long_to_wrap_is_left_out_of_a_watch_and_a_final_never_is() -> None:
    watchers = Watchers()
    outbox = Outbox(trio.testing.memory_stream_pair()[1], LoopdConnection(), 30.0,
                    trio.CancelScope(), "watch")  # fmt: skip
    huge = p.TurnEventFrame(p.Retrying(1, 500, "x" * (2 * 1024 * 1024)))
    assert watchers.encoded(S1, M1, huge) == b""
    long_answer = p.TurnDoneFrame("y" * (3 * 1024 * 1024), p.Usage(1, 2, 3, 0, False))
    lines = watchers.encoded(S1, M1, long_answer).splitlines()
    assert len(lines) == 4  # three turn_done_part, then the turn_done
    assert all(len(line) <= 1024 * 1024 for line in lines)
    assert outbox.queued == 0


def test_a_closed_or_broken_watcher_never_fails_the_turn_that_publishes() -> None:
    connection = LoopdConnection()
    connection.receive_data(watch())
    connection.next_event()
    outbox = Outbox(trio.testing.memory_stream_pair()[1], connection, 30.0,
                    trio.CancelScope(), "watch")  # fmt: skip
    outbox.close()
    outbox.put_encoded(b"late\n")  # a closed outbox keeps nothing, and does not raise
    assert outbox.queued == 0

    class Broken:
        dropped = False

        def put_encoded(self, _data: bytes) -> None:
            raise trio.ClosedResourceError

    watchers = Watchers()
    assert watchers.add(Watch((S1,), False, Broken()))  # type: ignore[arg-type]
    watchers.publish(S1, M1, p.TurnEventFrame(p.Content("x")))  # no exception
    assert len(watchers) == 0  # that watcher is dropped


async def test_a_detached_turn_sent_once_loopd_stops_runs_as_its_channel_s(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Still answered."))
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Hello."))
        daemon.stop(grace=30)  # nothing detached runs: the service ends at once
        await trio.testing.wait_all_tasks_blocked()
        answer = await one(daemon, turn(resume=True, content="Late.", detach=True))
        assert isinstance(answer[-1], p.TurnDoneFrame)


async def test_a_watch_ending_as_loopd_stops_still_sends_what_waits_for_it(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Last words."))
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Hello."))
        client, server = trio.testing.lockstep_stream_pair()  # a write waits for a read
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle_connection, server, daemon, 30.0)
            listening = Peer(client)  # type: ignore[arg-type]
            await listening.send(watch())
            assert await listening.next() == p.WatchingFrame((S1,))
            await one(daemon, turn(resume=True, content="Say it."))  # heard, not yet read
            daemon.stop(grace=30)  # nothing runs: the watch ends, once it is written
            with deadline(10, "the watch's frames and its end"):
                frames = []
                while (got := await listening.next()) is not None:
                    frames.append(got)
        assert isinstance(frames[-1], p.WatchEventFrame)
        assert isinstance(frames[-1].frame, p.TurnDoneFrame)


async def test_a_message_refused_for_its_size_after_a_turn_was_healed_may_come_again(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="Hi."), Fault(FaultKind.CONTEXT_FULL)],
                           default=Reply(content="Now it fits."))  # fmt: skip
    async with serving(tmp_path, fake) as daemon:
        await one(daemon, turn(content="Hello."))
        session = await daemon.sessions.get(S1, resume=True)
        session.append(p.UserRecord(session.records[0].time, "Cut off.", M2))  # no turn_end
        sent = frame(p.TurnFrame(S1, "Too big.", resume=True, origin=M1))
        refused = (await one(daemon, sent))[-1]
        assert refused.code is p.ErrorCode.SESSION_FULL  # type: ignore[union-attr]
        assert outcomes(daemon) == ["done", "interrupted"]  # healed, then M1 left nothing
        again = (await one(daemon, sent))[-1]
        assert isinstance(again, p.TurnDoneFrame)
        assert again.content == "Now it fits."


async def test_past_the_detached_turns_loopd_keeps_one_more_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "MAX_DETACHED", 2)
    fake = FakeLlamaServer(default=Reply(content="Ok."))
    async with serving(tmp_path, fake) as daemon:
        fake.hold(0)
        for name in ("d1", "d2"):
            async with connect(daemon) as peer:
                await peer.send(turn(p.SessionId(name), detach=True))
                await peer.next()
                await peer.stream.aclose()
        refused = await one(daemon, turn(p.SessionId("d3"), detach=True))
        assert refused[-1].code is p.ErrorCode.SESSION_BUSY  # type: ignore[union-attr]
        assert "detached turns" in refused[-1].message  # type: ignore[union-attr]
        fake.release(0)
        with deadline(10, "the two detached turns' ends"):
            while daemon.busy(p.SessionId("d1")) or daemon.busy(p.SessionId("d2")):
                await trio.testing.wait_all_tasks_blocked()
        assert isinstance((await one(daemon, turn(p.SessionId("d3"), detach=True)))[-1],
                          p.TurnDoneFrame)  # fmt: skip


async def test_what_is_kept_of_ended_origins_stays_small(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Ok."))
    async with serving(tmp_path, fake) as daemon:
        for n in range(20):
            origin = p.Origin("matrix", f"$e{n}")
            sent = frame(p.TurnFrame(S1, f"Message {n}.", resume=bool(n), origin=origin))
            assert isinstance((await one(daemon, sent))[-1], p.TurnDoneFrame)
        assert len(daemon.origins._book(S1).ended) <= 1  # the index holds the others
        again = frame(p.TurnFrame(S1, "Message 3.", resume=True, origin=p.Origin("matrix", "$e3")))
        assert await one(daemon, again) == [p.DuplicateFrame(p.Origin("matrix", "$e3"), "done",
                                                             "Ok.")]  # fmt: skip
