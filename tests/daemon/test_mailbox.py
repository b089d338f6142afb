"""A session's mailbox in a real Daemon: messages queued behind a turn and served in
order, soft breaks taken at a step boundary, hard breaks, and the channels that leave or ask
not to wait, over memory streams against the scripted fake."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.loopd.mailbox import MAILBOX_SIZE, Running
from boxmaker.loopd.service import Daemon
from boxmaker.loopd.watchers import Watchers
from boxmaker.session import Problem, check_log, sha256_hex
from boxmaker.testing.fake_server import FakeLlamaServer, Reply, Timing

from ..helpers import NoMemory, deadline
from .test_service import S1, Peer, connect, error_of, kinds, one_turn, open_daemon, turn

CLOCK = ("clock", "{}")


class GatedTools(NoMemory):
    """A tool port whose calls each wait until the test lets one through."""

    def __init__(self) -> None:
        self.waiting = 0
        self._arrived = trio.Event()
        self._send, self._receive = trio.open_memory_channel[None](math.inf)

    async def call(self, request: p.ToolRequest) -> p.ToolResponse:
        self.waiting += 1
        self._arrived.set()
        try:
            await self._receive.receive()
        finally:
            self.waiting -= 1
        return p.ResultResponse("21:31 UTC", p.DataClass.PUBLIC, False, False)

    async def arrival(self) -> None:
        """Until a call waits."""
        while not self.waiting:
            await self._arrived.wait()
            self._arrived = trio.Event()

    def let_one_through(self) -> None:
        self._send.send_nowait(None)


def users(daemon: Daemon, session: p.SessionId = S1) -> list[str]:
    path = daemon.store.folder(session) / "0.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["content"] for line in lines if line["type"] == "user"]


def bodies(fake: FakeLlamaServer) -> list[list[dict[str, Any]]]:
    return [body["messages"] for body in fake.requests[0]]


def assert_extensions(fake: FakeLlamaServer) -> None:
    """Every request of the session is a strict extension of the one before."""
    requests = bodies(fake)
    for before, after in itertools.pairwise(requests):
        assert after[: len(before)] == before


def assert_verified(daemon: Daemon, session: p.SessionId = S1) -> None:
    folder = daemon.store.folder(session)
    genesis = sha256_hex((folder / "0.baseline.json").read_bytes())
    verdict = check_log((folder / "0.jsonl").read_bytes(), folder / "0.jsonl", genesis, None)
    assert not isinstance(verdict, Problem), verdict


def final(frames: list[p.Frame]) -> p.Frame:
    return frames[-1]


async def test_three_messages_queued_behind_a_turn_are_served_in_order(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content=c) for c in ("One.", "A.", "B.", "C.")])
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with (
            connect(daemon) as first, connect(daemon) as a, connect(daemon) as b,
            connect(daemon) as c,
        ):  # fmt: skip
            await first.send(turn(content="First."))
            assert await first.next() == p.TurnEventFrame(p.Waiting(slot_busy=0))
            for ahead, (peer, text) in enumerate(((a, "a"), (b, "b"), (c, "c")), start=1):
                await peer.send(turn(resume=True, content=text))
                assert await peer.next() == p.TurnEventFrame(p.QueuedMessage(ahead=ahead))
            fake.release(0)
            with deadline(10, "the four turns' answers"):
                answers = [final(await peer.until_final()) for peer in (first, a, b, c)]
        assert [f.content for f in answers] == ["One.", "A.", "B.", "C."]  # type: ignore[union-attr]
        assert users(daemon) == ["First.", "a", "b", "c"]
        assert kinds(daemon).count("turn_end") == 4
        assert_extensions(fake)
        assert_verified(daemon)
        assert not daemon.busy(S1)


async def test_a_soft_break_during_a_tool_loop_is_taken_between_two_steps(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(tool_calls=(CLOCK,)), Reply(content="Noted: UTC.")])
    tools = GatedTools()
    async with open_daemon(tmp_path, fake, port=tools) as daemon:
        async with connect(daemon) as first, connect(daemon) as soft:
            await first.send(turn(content="What time is it?"))
            await tools.arrival()  # the first step's tool runs
            await soft.send(turn(resume=True, content="In UTC, please.", break_=p.Break.SOFT))
            assert await soft.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            tools.let_one_through()
            assert await soft.next() == p.TurnEventFrame(p.MessageTaken())
            with deadline(10, "the steered turn's answer"):
                done, joined = final(await first.until_final()), final(await soft.until_final())
        assert done == joined  # the soft break's channel gets the turn's final frame
        assert isinstance(done, p.TurnDoneFrame)
        assert done.content == "Noted: UTC."
        assert p.MessageTaken() in first.events()
        assert p.Content("Noted") in soft.events()  # and the rest of its events
        assert kinds(daemon)[1:] == [
            "user", "assistant", "usage", "call_sent", "tool_result",
            "break", "user", "assistant", "usage", "turn_end",
        ]  # fmt: skip
        first_request, second_request = bodies(fake)
        assert second_request[: len(first_request)] == first_request
        assert second_request[-1] == {"role": "user", "content": "In UTC, please."}
        assert_verified(daemon)


async def test_a_hard_break_mid_stream_cuts_the_turn_and_its_message_runs_next(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(
        script=[
            Reply(content="Hi."),
            Reply(content="one two three four five six seven"),
            Reply(content="Stopped."),
        ],
        timing=Timing(ms_per_token=100.0),
    )
    async with open_daemon(tmp_path, fake) as daemon:
        # Made first: the session's files are written in worker threads, during which the
        # autojump clock would run the second connection's first-frame timeout out.
        await one_turn(daemon, turn(content="Hello."))
        async with connect(daemon) as first, connect(daemon) as hard:
            await first.send(turn(resume=True, content="Write a very long essay."))
            while not [e for e in first.events() if isinstance(e, p.Content)]:
                await first.next()
            await hard.send(turn(resume=True, content="Stop. One word.", break_=p.Break.HARD))
            assert await hard.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            with deadline(10, "the broken turn's end and the break's answer"):
                broken = await error_of(await first.until_final())
                answer = final(await hard.until_final())
        assert broken.code is p.ErrorCode.BREAK_HARD
        assert answer == p.TurnDoneFrame("Stopped.", answer.usage)  # type: ignore[union-attr]
        assert fake.disconnects == 1  # the cut stream was closed
        assert kinds(daemon)[5:] == [
            "user", "break", "turn_end",  # nothing of the cut completion
            "user", "assistant", "usage", "turn_end",
        ]  # fmt: skip
        log = [
            json.loads(line)
            for line in (daemon.store.folder(S1) / "0.jsonl").read_text().splitlines()
        ]
        cut_at, end = log[6], log[7]
        assert (cut_at["hard"], cut_at["at"], end["outcome"]) == (True, "completion", "break_hard")
        assert users(daemon) == ["Hello.", "Write a very long essay.", "Stop. One word."]
        _hello, cut, after = bodies(fake)
        assert after[: len(cut)] == cut  # the next request is a strict extension of the cut one
        assert_verified(daemon)


async def test_a_hard_break_goes_ahead_of_the_plain_messages_waiting(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as first, connect(daemon) as plain, connect(daemon) as hard:
            await first.send(turn(content="First."))
            await first.next()  # waiting for the slot
            await plain.send(turn(resume=True, content="Plain."))
            assert await plain.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            await hard.send(turn(resume=True, content="Hard.", break_=p.Break.HARD))
            assert await hard.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            with deadline(10, "the broken turn's end"):
                assert (await error_of(await first.until_final())).code is p.ErrorCode.BREAK_HARD
            fake.release(0)
            with deadline(10, "the two answers"):
                for peer in (hard, plain):
                    assert isinstance(final(await peer.until_final()), p.TurnDoneFrame)
        assert users(daemon) == ["First.", "Hard.", "Plain."]
        assert fake.completed == 2  # the broken turn's request left while it waited for the slot
        assert_verified(daemon)


async def test_a_soft_break_that_finds_no_step_boundary_runs_as_a_turn_of_its_own(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="An answer."), Reply(content="Another.")])
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as first, connect(daemon) as soft:
            await first.send(turn(content="First."))
            await first.next()
            await soft.send(turn(resume=True, content="Also this.", break_=p.Break.SOFT))
            assert await soft.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            fake.release(0)
            with deadline(10, "both answers"):
                done = final(await first.until_final())
                own = final(await soft.until_final())
        assert (done.content, own.content) == ("An answer.", "Another.")  # type: ignore[union-attr]
        assert p.MessageTaken() not in soft.events()
        assert "break" not in kinds(daemon)  # no turn was interrupted
        assert kinds(daemon).count("turn_end") == 2


async def test_a_queued_channel_that_leaves_is_dropped_from_the_mailbox(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as first, connect(daemon) as stays:
            await first.send(turn(content="First."))
            await first.next()
            async with connect(daemon) as leaves:
                await leaves.send(turn(resume=True, content="Gone."))
                assert await leaves.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
                await leaves.stream.aclose()
            await trio.testing.wait_all_tasks_blocked()
            await stays.send(turn(resume=True, content="Stays."))
            assert await stays.next() == p.TurnEventFrame(p.QueuedMessage(ahead=1))
            fake.release(0)
            with deadline(10, "the two answers"):
                for peer in (first, stays):
                    assert isinstance(final(await peer.until_final()), p.TurnDoneFrame)
        assert users(daemon) == ["First.", "Stays."]
        assert not daemon.busy(S1)


async def test_a_full_mailbox_answers_session_busy_saying_so(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as first:
            await first.send(turn(content="First."))
            await first.next()
            async with trio.open_nursery() as nursery:
                peers: list[Peer] = []

                async def queued(
                    n: int, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                ) -> None:
                    async with connect(daemon) as peer:
                        peers.append(peer)
                        await peer.send(turn(resume=True, content=f"m{n}"))
                        await peer.next()
                        task_status.started()
                        await peer.until_final()

                for n in range(MAILBOX_SIZE):
                    await nursery.start(queued, n)
                assert [peer.frames for peer in peers][-1] == [
                    p.TurnEventFrame(p.QueuedMessage(ahead=MAILBOX_SIZE))
                ]
                busy = await error_of(await one_turn(daemon, turn(resume=True, content="17")))
                assert busy.code is p.ErrorCode.SESSION_BUSY
                assert f"{MAILBOX_SIZE} messages are waiting" in busy.message
                fake.release(0)
            await first.until_final()
        assert users(daemon) == ["First.", *(f"m{n}" for n in range(MAILBOX_SIZE))]


async def test_the_channels_a_turn_took_hear_cancelled_when_its_own_channel_leaves(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(tool_calls=(CLOCK,)))
    tools = GatedTools()
    async with open_daemon(tmp_path, fake, "[loop]\nrepeat_detection = false\n", tools) as daemon:
        async with connect(daemon) as soft:
            async with connect(daemon) as first:
                await first.send(turn(content="Loop."))
                await tools.arrival()
                await soft.send(turn(resume=True, content="Steer.", break_=p.Break.SOFT))
                await soft.next()  # queued
                tools.let_one_through()
                assert await soft.next() == p.TurnEventFrame(p.MessageTaken())
                await tools.arrival()  # the turn goes on: the next step's tool waits
                await first.stream.aclose()
            with deadline(10, "the joined channel's final frame"):
                cancelled = await error_of(await soft.until_final())
        assert cancelled.code is p.ErrorCode.CANCELLED
        assert "the channel that started it left" in cancelled.message
        assert kinds(daemon)[-1] == "turn_end"
        assert_verified(daemon)


def test_a_joined_channel_that_cannot_take_an_event_is_dropped_not_the_turn() -> None:
    seen: list[p.TurnEvent] = []
    frame = p.TurnFrame(p.SessionId("s"), "hi", resume=True)
    running = Running(frame.session, frame, seen.append, Watchers())

    def full(_event: p.TurnEvent) -> None:
        raise trio.WouldBlock  # its connection's queue refuses

    running.listeners.append(full)
    running.emit(p.Content("a"))
    running.emit(p.Content("b"))
    assert seen == [p.Content("a"), p.Content("b")]
    assert running.listeners == [seen.append]
