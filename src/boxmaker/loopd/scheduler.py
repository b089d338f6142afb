"""loopd's scheduler (SPEC section 19): one trio task that reads `schedules.jsonl`, sleeps
until the next due time, and posts each due time's message as a detached turn of its session
with the origin `schedule:<id>@<due>`, then appends what became of it (`fired`).

The origin in the session's log is the truth: at start, each schedule's due times after its
last `fired` whose origin a log holds get their `fired` (a turn posted just before loopd
stopped); then the times that fell due while loopd was down fire once, or not (`catch_up`).
A due time is posted at most once by a loopd, and a session runs at most one turn of an
origin (a second is a `duplicate`), so no due time runs twice.

The file is looked at once a second (`POLL_S`), so what bxctl or brokerd append is seen
without a restart, and a leap of the wall clock is seen within a second. Which due times fire
is `schedules.Plan`'s, pure; this module does the I/O (the file in a worker thread, the turns
through `Daemon`). A damaged file stops every schedule, said once, until it is mended.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import trio

from .. import layout
from ..config import SchedulesConfig
from ..proto import (
    DuplicateFrame,
    ErrorCode,
    Fired,
    FiredRecord,
    Origin,
    PauseRecord,
    SchedulesRecord,
    SessionId,
    Timestamp,
    TurnDoneFrame,
    TurnFrame,
    WireError,
)
from ..schedules import (
    Entry,
    Fire,
    Held,
    Plan,
    SchedulesDamaged,
    firing_due,
    origin_id,
    schedules_file,
)
from ..serving import blocking
from ..session import Exposed, Link, StorageError
from ..store import identity_of
from .exactly_once import OriginsUnreadable
from .held import Answer, Tether
from .service import Daemon

__all__ = ["CHANNEL", "POLL_S", "Scheduler"]

log = logging.getLogger("loopd")

CHANNEL = "schedule"  # the origin channel of a scheduled turn
POLL_S = 1.0  # the longest the scheduler sleeps: the file and the wall clock looked at again
WHY_MOST = 300  # characters of a failure kept in its `fired` record
_PROBLEMS = (SchedulesDamaged, StorageError, Exposed, OSError)
T = TypeVar("T")


class Scheduler:
    """The schedules of one home, fired through `daemon`; `wall` is the wall clock (an aware
    `datetime`), apart from trio's."""

    def __init__(
        self,
        daemon: Daemon,
        home: Path,
        bounds: SchedulesConfig,
        wall: Callable[[], datetime],
        *,
        threads: bool = True,
    ) -> None:
        self.daemon = daemon
        self.home = home
        self.file = schedules_file(home)
        self.plan = Plan(bounds)
        self.wall = wall
        self._offset, self._seen = 0, (0, 0, 0)
        self._link: Link | None = None
        self._broken = ""  # why the file cannot be read, said once
        self._reading = trio.Lock()
        self._threads = threads  # else the file is read in the event loop (tests: the
        # autojump clock leaps while a thread runs)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Once the file reads: reconcile and catch up; then fire what falls due, until
        cancelled. A pass that fails (a bug) is said once and the next tried a second later:
        the scheduler never takes loopd down."""
        started, failed = False, ""
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                wait: float | None = None
                try:
                    await self._read()
                    if not self._broken:
                        if not started:
                            await self._start(nursery)
                            started = True
                        else:
                            self._act(self.plan.due(self.wall(), trio.current_time()), nursery)
                        wait = self.plan.wake(self.wall(), trio.current_time())
                    failed = ""
                except Exception as error:
                    if repr(error) != failed:
                        log.exception("schedules: a pass failed; they go on in %g s", POLL_S)
                    failed = repr(error)
                await trio.sleep(POLL_S if wait is None else min(wait, POLL_S))

    async def _start(self, nursery: trio.Nursery) -> None:
        await self._reconcile()
        self._act(self.plan.start(self.wall(), trio.current_time()), nursery)
        live = self.plan.book.live()
        paused = sum(entry.paused is not None for entry in live)
        log.info("schedules: %d live (%d paused) in %s", len(live), paused, self.file.path)

    # --- the file -----------------------------------------------------------------------

    async def _read(self) -> None:
        """Take in what the file gained since the last look (nothing when it did not change)."""
        async with self._reading:
            await self._read_new()

    async def _read_new(self) -> None:
        try:
            seen = await self._blocking(self._stat)
            if seen == self._seen and not self._broken:
                return
            # Another file than the one read (replaced, cut back), or one that was damaged:
            # read whole.
            whole = self._broken != "" or seen[0] != self._seen[0] or seen[1] < self._offset
            offset, after = (0, None) if whole else (self._offset, self._link)
            records, link, end = await self._blocking(self.file.read_from, offset, after)
        except _PROBLEMS as error:
            if str(error) != self._broken:
                log.error("schedules: none fires until this is mended: %s", error)
            self._broken = str(error)
            return
        if self._broken:
            log.info("schedules: %s reads again", self.file.path)
        self._broken, self._seen = "", seen
        self._offset, self._link = end, link
        self.plan.take(records, whole=whole)

    def _stat(self) -> tuple[int, int, int]:
        try:
            st = os.stat(self.file.path, follow_symlinks=False)
        except FileNotFoundError:
            return (0, 0, 0)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    async def _append(self, *records: SchedulesRecord) -> None:
        """Append `records`, each under the file's lock, reading only what was written since
        the scheduler's last look; one that cannot be is said (a `fired` lost is found again
        at the next start, from the session's log)."""
        for record in records:
            try:
                async with self._reading:
                    known = (self._offset, self._link)
                await self._blocking(self.file.append_known, record, *known)
            except _PROBLEMS as error:
                log.error("schedules: %s not written: %s", type(record).__name__, error)
                return
            await self._read()

    async def _blocking(self, work: Callable[..., T], *args: Any) -> T:
        return await blocking(work, *args, threads=self._threads)

    # --- at start -----------------------------------------------------------------------

    async def _reconcile(self) -> None:
        """Each due time after a schedule's last `fired` whose turn a session's log holds
        gets its `fired` (`ran`)."""
        folders = _names(layout.sessions_folder(self.home))
        for entry in self.plan.book.live():
            id = entry.record.id
            named: list[SessionId | None] = [entry.record.session]
            if entry.record.session is None:  # each firing's own session: `<id>-<due>`
                named = [_session(n) for n in folders if _after(firing_due(id, n), entry.since)]
            found: list[tuple[datetime, SessionId]] = []
            for sid in filter(None, named):
                found += [(due, sid) for due in await self._posted(sid, entry)]
            records = [
                FiredRecord(
                    Timestamp(self.wall()),
                    id,
                    Timestamp(due),
                    Fired.RAN,
                    session=None if entry.record.session else sid,
                )
                for due, sid in sorted(found)
            ]
            if records:
                log.info("schedules: %s ran %d time(s) before loopd stopped", id, len(records))
                await self._append(*records)

    async def _posted(self, sid: SessionId, entry: Entry) -> list[datetime]:
        """The due times after `entry.since` whose turns the session's log holds."""
        prefix, since, origins = f"{entry.record.id}@", entry.since, self.daemon.origins
        dues = []
        try:
            async with origins.held(sid):
                for origin in await origins.of_channel(sid, CHANNEL):
                    if not origin.id.startswith(prefix):
                        continue
                    try:
                        due = Timestamp.parse(origin.id.removeprefix(prefix)).value
                    except ValueError:
                        continue
                    if due > since and await origins.known(sid, origin, lambda _o: None):
                        dues.append(due)
        except Exception as error:  # an unreadable log: its schedule fires as if none ran
            log.warning("schedules: cannot read %s's origins: %s", sid, error)
        return dues

    # --- firing -------------------------------------------------------------------------

    def _act(self, actions: list[Fire | Held], nursery: trio.Nursery) -> None:
        for action in actions:
            if isinstance(action, Held):
                log.warning("schedules: %s paused: %s", action.fired.id, action.pause)
                held = [action.fired] + ([action.pause] if action.pause else [])
                nursery.start_soon(self._append, *held)
            else:
                nursery.start_soon(self._fire_safely, action)

    async def _fire_safely(self, fire: Fire) -> None:
        try:
            await self._fire(fire)
        except Exception:  # a bug: this due time is lost, the scheduler goes on
            log.exception("schedules: %s due %s failed", fire.id, Timestamp(fire.due))
            self.plan.running.pop(fire.id, None)

    async def _fire(self, fire: Fire) -> None:
        now = Timestamp(self.wall())
        due = Timestamp(fire.due)
        folder = layout.session_folder(self.home, str(fire.session))
        identity = await self._blocking(identity_of, folder)
        if not fire.new_session and identity != fire.identity:
            await self._gone(fire, now, "its session is gone (removed, or made again)")
            return
        frame = TurnFrame(
            fire.session,
            fire.content,
            # A firing's own session exists only when a start before this one made it.
            resume=bool(identity),
            detach=True,
            origin=Origin(CHANNEL, origin_id(fire.id, fire.due)),
            untrusted=fire.tainted,
        )
        finals: list[Answer] = []
        tether = Tether(lambda _event: None, finals.append, looks=False)
        posted = self.daemon.detach(frame, tether)
        if posted is False:  # loopd is stopping: the next start catches it up
            self.plan.running.pop(fire.id, None)
            return
        log.info("schedules: %s due %s posted to %s", fire.id, due, fire.session)
        if isinstance(posted, WireError):
            finals.append(posted)
        else:
            await tether.done.wait()
        final = finals[0] if finals else None
        if isinstance(final, WireError) and final.code is ErrorCode.NO_SUCH_SESSION:
            await self._gone(fire, now, "its session is gone")
            return
        outcome, why = await self._outcome(fire, frame, final)
        made = fire.session if fire.new_session else None
        record = FiredRecord(Timestamp(self.wall()), fire.id, due, outcome, session=made, why=why)
        with trio.CancelScope(shield=True):  # a few milliseconds: kept as loopd stops
            await self._append(*self.plan.ended(record))
        log.info("schedules: %s due %s %s", fire.id, due, outcome.value)

    async def _outcome(
        self, fire: Fire, frame: TurnFrame, final: Answer | None
    ) -> tuple[Fired, str]:
        """What became of a posted due time, and why it failed: `ran` when its message is in
        the session's log (whatever its turn's end), `busy` when the mailbox was full, else
        `failed` (a message too long for the session, a disk that refused it)."""
        if isinstance(final, TurnDoneFrame | DuplicateFrame):
            return Fired.RAN, ""
        if isinstance(final, WireError) and final.code is ErrorCode.SESSION_BUSY:
            return Fired.BUSY, ""
        origins, origin = self.daemon.origins, frame.origin
        assert origin is not None
        try:
            async with origins.held(fire.session):
                kept = await origins.known(fire.session, origin, lambda _o: None) is not None
        except OriginsUnreadable:
            kept = False
        if kept:
            return Fired.RAN, ""
        said = final.message if isinstance(final, WireError) else "its turn left nothing"
        return Fired.FAILED, said[:WHY_MOST]

    async def _gone(self, fire: Fire, now: Timestamp, why: str) -> None:
        log.warning("schedules: %s paused: %s", fire.id, why)
        fired = FiredRecord(now, fire.id, Timestamp(fire.due), Fired.GONE)
        await self._append(*self.plan.ended(fired), PauseRecord(now, fire.id, why))


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _after(due: datetime | None, since: datetime) -> bool:
    return due is not None and due > since


def _session(name: str) -> SessionId | None:
    try:
        return SessionId(name)
    except ValueError:  # a folder no session could have made
        return None
