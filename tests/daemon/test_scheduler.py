"""loopd's scheduler in a real Daemon against the fake, under the autojump clock, its wall
clock driven from trio's with a leap of its own: a due time's turn runs detached with its
origin, reaches a watch, and gets its `fired`; a tainted schedule's turn is tainted; a turn
in the way makes the message wait; a session gone pauses the schedule; a posted turn found in
the log at start gets its `fired` and never runs again; a damaged file fires nothing and
fires again once mended; a change to the file is seen without a restart."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.channel import encode_frame
from boxmaker.clock import TickingClock
from boxmaker.config import SchedulesConfig
from boxmaker.loopd.mailbox import MAILBOX_SIZE
from boxmaker.loopd.scheduler import Scheduler
from boxmaker.loopd.service import Daemon
from boxmaker.schedules import Book, Wanted, firing_session, made, origin_id, schedules_file
from boxmaker.session import tainted
from boxmaker.store import identity_of
from boxmaker.testing import FakeTools
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import deadline, read_log
from .test_outlive import heard, one, serving, watcher
from .test_service import S1, connect, turn

WALL = datetime(2026, 12, 6, 6, 59, 30, tzinfo=UTC)


class Wall:
    """A wall clock that follows trio's from `WALL`, plus whatever `leap` adds."""

    def __init__(self) -> None:
        self.start = trio.current_time()
        self.leaped = timedelta(0)

    def __call__(self) -> datetime:
        return WALL + timedelta(seconds=trio.current_time() - self.start) + self.leaped


def schedule(
    home: Path,
    when: str,
    session: p.SessionId | None = S1,
    by: p.CreatedBy = p.CreatedBy.OWNER,
    *,
    tainted: bool = False,
    catch_up: p.CatchUp = p.CatchUp.ONCE,
    message: str = "Look again.",
) -> str:
    """Append a schedule as `bxctl schedule add` (or brokerd) does; its id."""
    identity = identity_of(home / "sessions" / str(session)) if session else ""
    wanted = Wanted(when, "UTC", message, by, session, identity,
                    new_session=session is None, catch_up=catch_up, tainted=tainted)  # fmt: skip
    bounds = SchedulesConfig(max_message_chars=len(message))
    record = schedules_file(home).append(
        lambda held: made(Book(held), wanted, p.Timestamp(WALL), bounds)
    )
    assert isinstance(record, p.ScheduleRecord), record
    return record.id


def fired(home: Path) -> list[tuple[str, str, str]]:
    return [
        (r.id, str(r.due), r.outcome.value)
        for r in schedules_file(home).read()
        if isinstance(r, p.FiredRecord)
    ]


@asynccontextmanager
async def scheduling(daemon: Daemon, wall: Wall, **bounds: int) -> AsyncIterator[Scheduler]:
    """The scheduler, its file, the origins and the sessions read in the event loop: the
    autojump clock leaps to the next deadline while a worker thread runs, and the due times
    fired must be the ones the test drives."""
    config = SchedulesConfig(**bounds)  # type: ignore[arg-type]
    scheduler = Scheduler(daemon, daemon.store.home, config, wall, threads=False)
    daemon.origins.threads = daemon.sessions.threads = False
    async with trio.open_nursery() as nursery:
        await nursery.start(scheduler.run)
        yield scheduler
        nursery.cancel_scope.cancel()


async def made_session(daemon: Daemon) -> None:
    (done,) = [f for f in await one(daemon, turn(content="Hello.")) if p.frame_is_final(f)]
    assert isinstance(done, p.TurnDoneFrame)


async def test_a_due_time_runs_as_a_detached_turn_that_a_watch_hears(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Checked."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        id = schedule(tmp_path, "0 7 * * *")
        wall = Wall()
        async with watcher(daemon) as listening, scheduling(daemon, wall):
            with deadline(60, "the 07:00 turn"):
                frames = await heard(listening)
            due = datetime(2026, 12, 6, 7, 0, tzinfo=UTC)
            first = frames[0]
            assert isinstance(first, p.TurnFrame)
            assert first.origin == p.Origin("schedule", origin_id(id, due))
            assert first.detach
            assert not first.untrusted
            assert first.content.startswith(f"[A scheduled message ({id}, cron 0 7 * * *), set ")
            assert first.content.endswith("\n\nLook again.")
            assert isinstance(frames[-1], p.TurnDoneFrame)
            await trio.sleep(1)
            assert fired(tmp_path) == [(id, str(p.Timestamp(due)), "ran")]
        users = [r for r in read_log(daemon.store.folder(S1) / "0.jsonl")
                 if isinstance(r, p.UserRecord)]  # fmt: skip
        assert users[-1].content == first.content  # recorded as sent
        assert users[-1].origin == first.origin


async def test_a_tainted_schedule_runs_a_tainted_turn(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        schedule(tmp_path, "every 10s", by=p.CreatedBy.AGENT, tainted=True)
        async with watcher(daemon) as listening, scheduling(daemon, Wall()):
            with deadline(60, "the scheduled turn"):
                frames = await heard(listening)
        assert isinstance(frames[0], p.TurnFrame)
        assert frames[0].untrusted
        records = read_log(daemon.store.folder(S1) / "0.jsonl")
        assert tainted(records)
        first_untrusted = next(i for i, r in enumerate(records) if isinstance(r, p.UserRecord)
                               and r.untrusted)  # fmt: skip
        assert not tainted(records[:first_untrusted])


async def test_a_turn_in_the_way_makes_the_message_wait_and_then_it_runs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        id = schedule(tmp_path, "every 30s")
        fake.hold(0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, daemon, turn(content="A long one.", resume=True))
            await trio.testing.wait_all_tasks_blocked()
            assert daemon.busy(S1)
            async with watcher(daemon) as listening, scheduling(daemon, Wall()):
                await trio.sleep(31)  # due, and waiting in the mailbox
                assert fired(tmp_path) == []
                fake.release(0)
                with deadline(600, "the long turn, then the scheduled one"):
                    await heard(listening)  # the long one
                    scheduled = await heard(listening)
                    await trio.sleep(1)
        assert isinstance(scheduled[0], p.TurnFrame)
        assert scheduled[0].origin is not None
        assert isinstance(scheduled[-1], p.TurnDoneFrame)
        assert fired(tmp_path) == [(id, str(p.Timestamp(WALL + timedelta(seconds=30))), "ran")]


async def test_a_session_gone_pauses_its_schedule_and_says_why(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        id = schedule(tmp_path, "every 10s")
        daemon.sessions.close()
        shutil.rmtree(daemon.store.folder(S1))
        await made_session(daemon)  # another session under its id: not the schedule's
        async with scheduling(daemon, Wall()):
            await trio.sleep(30)
        records = schedules_file(tmp_path).read()
        assert fired(tmp_path) == [(id, str(p.Timestamp(WALL + timedelta(seconds=10))), "gone")]
        (pause,) = [r for r in records if isinstance(r, p.PauseRecord)]
        assert "its session is gone" in pause.why
        assert [r.content for r in read_log(daemon.store.folder(S1) / "0.jsonl")
                if isinstance(r, p.UserRecord)] == ["Hello."]  # fmt: skip


async def test_a_turn_posted_before_loopd_stopped_gets_its_fired_and_never_runs_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        id = schedule(tmp_path, "every 1h")
        due = WALL + timedelta(hours=1)
        # As loopd posts it, then stops before its `fired` is written.
        origin = p.Origin("schedule", origin_id(id, due))
        frame = p.TurnFrame(S1, "the scheduled message", resume=True, detach=True, origin=origin)
        await one(daemon, encode_frame(frame))
        wall = Wall()
        wall.leaped = timedelta(hours=2, minutes=5)  # loopd starts again an hour later
        async with scheduling(daemon, wall):
            await trio.sleep(10)
        latest = WALL + timedelta(hours=2)  # caught up once; the one posted is not run again
        assert fired(tmp_path) == [
            (id, str(p.Timestamp(due)), "ran"),
            (id, str(p.Timestamp(latest)), "ran"),
        ]
        users = [r for r in read_log(daemon.store.folder(S1) / "0.jsonl")
                 if isinstance(r, p.UserRecord)]  # fmt: skip
        again = p.Origin("schedule", origin_id(id, latest))
        assert [u.origin for u in users] == [None, origin, again]


async def test_what_fell_due_while_loopd_was_down_fires_once_or_not_at_all(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        once = schedule(tmp_path, "every 10m")
        skip = schedule(tmp_path, "every 10m", catch_up=p.CatchUp.SKIP)
        wall = Wall()
        wall.leaped = timedelta(hours=2, minutes=5)  # down two hours: twelve due times each
        async with scheduling(daemon, wall):
            await trio.sleep(60)
        latest = str(p.Timestamp(WALL + timedelta(hours=2)))
        assert fired(tmp_path) == [(once, latest, "ran")]
        assert skip not in {id for id, _, _ in fired(tmp_path)}
        users = [r for r in read_log(daemon.store.folder(S1) / "0.jsonl")
                 if isinstance(r, p.UserRecord)]  # fmt: skip
        assert len(users) == 2  # "Hello." and the one catch-up
        assert "it starts 5 min late" in users[-1].content


async def test_a_damaged_file_fires_nothing_and_a_new_schedule_is_seen_without_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        schedule(tmp_path, "every 10s")
        path = schedules_file(tmp_path).path
        good = path.read_bytes()
        path.write_bytes(good.replace(b"Look again.", b"Look AGAIN."))  # its hash no longer holds
        async with scheduling(daemon, Wall()) as scheduler:
            await trio.sleep(30)
            assert "schedules.jsonl, line 1" in scheduler._broken
            assert daemon.store.folder(S1).joinpath("0.jsonl").read_bytes().count(b'"user"') == 1
            path.write_bytes(good)  # mended at 07:00:00: three due times passed, one fires
            await trio.sleep(15)
            assert [due[11:19] for _, due, _ in fired(tmp_path)] == ["07:00:00", "07:00:10"]
            later = schedule(tmp_path, "every 1m")  # appended while it runs
            await trio.sleep(61)
            assert later in {id for id, _, _ in fired(tmp_path)}


def shown(daemon: Daemon) -> tuple[int, int]:
    """The session's index: the turns it holds, and the last one a person saw end."""
    index = json.loads((daemon.store.folder(S1) / "index.json").read_text())
    return index["turns"], index["shown"]


async def test_a_turn_nobody_watched_is_not_shown_and_one_a_watch_heard_is(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        assert shown(daemon) == (1, 1)  # the chat's own turn: it saw the answer
        schedule(tmp_path, "every 10s")
        async with scheduling(daemon, Wall()):
            await trio.sleep(15)  # one scheduled turn, nobody watching
            assert shown(daemon) == (2, 1)
            async with watcher(daemon) as listening:
                with deadline(60, "the next scheduled turn"):
                    await heard(listening)
                await trio.sleep(1)
            assert shown(daemon) == (3, 3)


async def test_a_new_session_schedule_makes_a_session_per_firing_found_again_after_a_crash(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        id = schedule(tmp_path, "every 1h", session=None)
        first, second = WALL + timedelta(hours=1), WALL + timedelta(hours=2)
        # The first firing posted before loopd stopped: its session and turn are there.
        made = firing_session(id, first)
        origin = p.Origin("schedule", origin_id(id, first))
        frame = p.TurnFrame(made, "the message", resume=False, detach=True, origin=origin)
        await one(daemon, encode_frame(frame))
        wall = Wall()
        wall.leaped = timedelta(hours=1, minutes=59, seconds=50)
        later = firing_session(id, second)
        async with watcher(daemon, session=later) as listening, scheduling(daemon, wall):
            with deadline(600, "the second firing's turn"):  # the second firing's session
                frames = await heard(listening)
            await trio.sleep(1)
        assert isinstance(frames[-1], p.TurnDoneFrame)
        records = [r for r in schedules_file(tmp_path).read() if isinstance(r, p.FiredRecord)]
        assert [(r.due.value, r.outcome, r.session) for r in records] == [
            (first, p.Fired.RAN, made),
            (second, p.Fired.RAN, firing_session(id, second)),
        ]
        log = read_log(daemon.store.folder(firing_session(id, second)) / "0.jsonl")
        (user,) = [r for r in log if isinstance(r, p.UserRecord)]
        assert user.origin == p.Origin("schedule", origin_id(id, second))
        assert user.content.endswith("\n\nLook again.")


async def test_a_firing_session_made_before_loopd_stopped_is_resumed_not_refused(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        id = schedule(tmp_path, "every 1h", session=None)
        due = WALL + timedelta(hours=1)
        made = firing_session(id, due)
        # loopd made the firing's session and stopped before its message was written.
        await one(daemon, encode_frame(p.TurnFrame(made, "Made.", resume=False)))
        wall = Wall()
        wall.leaped = timedelta(hours=1, minutes=1)
        async with watcher(daemon, session=made) as listening, scheduling(daemon, wall):
            with deadline(600, "the caught-up firing's turn"):
                frames = await heard(listening)
        assert isinstance(frames[-1], p.TurnDoneFrame)
        users = [r for r in read_log(daemon.store.folder(made) / "0.jsonl")
                 if isinstance(r, p.UserRecord)]  # fmt: skip
        assert [u.origin for u in users] == [None, p.Origin("schedule", origin_id(id, due))]


async def test_a_message_that_never_reached_the_log_is_failed_not_ran(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        long = " ".join(f"w{n}" for n in range(5000))  # more than the fake's 4,096 tokens
        id = schedule(tmp_path, "every 1h", message=long)
        async with watcher(daemon) as listening, scheduling(daemon, Wall()):
            with deadline(7200, "the scheduled turn's end"):
                frames = await heard(listening)
            await trio.sleep(1)
        assert isinstance(frames[-1], p.WireError)
        assert frames[-1].code is p.ErrorCode.SESSION_FULL
        (record,) = [r for r in schedules_file(tmp_path).read() if isinstance(r, p.FiredRecord)]
        assert (record.id, record.outcome) == (id, p.Fired.FAILED)
        assert "cannot fit" in record.why
        assert all(r.origin is None for r in read_log(daemon.store.folder(S1) / "0.jsonl")
                   if isinstance(r, p.UserRecord))  # fmt: skip


async def test_a_full_mailbox_records_busy_and_the_schedule_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Done."))
    async with serving(tmp_path, fake) as daemon:
        await made_session(daemon)
        id = schedule(tmp_path, "every 30s")
        fake.hold(0)
        async with trio.open_nursery() as nursery:
            for n in range(MAILBOX_SIZE + 1):  # one running, the mailbox full behind it
                nursery.start_soon(one, daemon, turn(content=f"Queued {n}.", resume=True))
            await trio.testing.wait_all_tasks_blocked()
            async with scheduling(daemon, Wall()):
                await trio.sleep(31)
                assert fired(tmp_path) == [
                    (id, str(p.Timestamp(WALL + timedelta(seconds=30))), "busy")
                ]
                fake.release(0)
                await trio.sleep(30)  # the mailbox empties; the next due time runs
            assert [o for _, _, o in fired(tmp_path)] == ["busy", "ran"]


async def test_a_scheduled_turn_asks_only_through_a_watch_that_can_ask(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    echo = '{"name": "echo", "arguments": {"text": "written"}}'
    call = Reply(tool_calls=(("call_tool", echo),))
    script = [Reply(content="Made."), call, Reply(content="Nobody to ask."), call]
    fake = FakeLlamaServer(script=script, default=Reply(content="Asked."))
    tools = FakeTools(TickingClock(), ask=("echo",))
    async with serving(tmp_path, fake, port=tools) as daemon:
        await made_session(daemon)
        schedule(tmp_path, "every 1m")
        async with scheduling(daemon, Wall()):
            async with watcher(daemon) as listening:  # it cannot ask: the call is denied
                with deadline(600, "the first scheduled turn"):
                    await heard(listening)
            assert tools.answers == [("a-1", p.Answer.DENY)]
            async with watcher(daemon, can_ask=True) as listening:
                with deadline(600, "the second turn's question"):
                    while True:
                        got = await listening.next()
                        assert isinstance(got, p.WatchEventFrame)
                        event = getattr(got.frame, "event", None)
                        if isinstance(event, p.ApprovalNeeded):
                            break
                async with connect(daemon) as answering:
                    await answering.send(encode_frame(p.ApprovalFrame(event.id, p.Answer.ONCE)))
                    assert await answering.next() == p.ApprovalDoneFrame(event.id)
                rest = await heard(listening)
        assert isinstance(rest[-1], p.TurnDoneFrame)
        assert tools.answers == [("a-1", p.Answer.DENY), (event.id, p.Answer.ONCE)]
