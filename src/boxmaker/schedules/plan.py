"""loopd's scheduler as pure logic (SPEC section 19): which due times fire now, which are held
back and why, and when to look again. The wall clock (`now`, an aware `datetime`) and trio's
monotonic clock (`tick`, seconds) are both arguments, so a test drives each on its own: a
jump of the wall clock is a `now` that leaps, the bounds count in `tick`.

The rules:
- A schedule's due times after its `since` (`Book`) are dealt with in order, one due time per
  pass: when several fell due (loopd was down, the wall clock leapt, the machine slept), only
  the latest fires, once. At start, `catch_up = skip` passes them over instead.
- A schedule whose turn still runs or waits records `overlap` for its next due time, after its
  running one's `fired` (so `fired` records follow their due times, schedule by schedule).
- At most one scheduled turn starts per second per session (a second one waits its second);
  at most `max_scheduled_turns_per_hour` start in any hour: a schedule past it is paused.
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from attrs import frozen

from ..config import SchedulesConfig
from ..proto import (
    CatchUp,
    CreatedBy,
    Fired,
    FiredRecord,
    PauseRecord,
    SchedulesRecord,
    SessionId,
    Timestamp,
)
from .book import CLOCK_SLACK, Book, Entry
from .when import When, due_after, due_at_or_before, parse_when, zone_of

__all__ = ["Fire", "Held", "Plan", "firing_due", "firing_session", "header", "origin_id"]

HOUR = 3600.0
_STALE = object()  # the earliest next due time is to be found again
SESSION_GAP = 1.0  # seconds between two scheduled turns' starts in one session


@frozen
class Fire:
    """Post one due time's turn: `content` is the message after the line that names it."""

    id: str
    due: datetime
    session: SessionId
    content: str
    new_session: bool
    identity: str
    tainted: bool


@frozen
class Held:
    """A due time that runs no turn: its `fired` record, and the pause a bound makes."""

    fired: FiredRecord
    pause: PauseRecord | None = None


def origin_id(id: str, due: datetime) -> str:
    """The origin id of a due time's turn (`s3@2026-12-07T07:00:00.000000Z`)."""
    return f"{id}@{Timestamp(due)}"


def firing_session(id: str, due: datetime) -> SessionId:
    """The session of one firing of a `new_session` schedule: `s3-20261207T070000Z`."""
    fraction = f".{due.microsecond:06d}" if due.microsecond else ""
    return SessionId(f"{id}-{due:%Y%m%dT%H%M%S}{fraction}Z")


def firing_due(id: str, name: str) -> datetime | None:
    """The due time a session's name says it is the firing of, for schedule `id` (None: not
    one of its firings' names)."""
    stamp = name.removeprefix(f"{id}-")
    if stamp == name or not stamp.endswith("Z"):
        return None
    form = "%Y%m%dT%H%M%S.%fZ" if "." in stamp else "%Y%m%dT%H%M%SZ"
    try:
        return datetime.strptime(stamp, form).replace(tzinfo=UTC)
    except ValueError:
        return None


def header(entry: Entry, due: datetime, now: datetime) -> str:
    """The line before a scheduled message: who scheduled it, when it was due in its zone,
    how late it starts; for the agent's own schedule, that the words are its own."""
    record = entry.record
    zone = zone_of(record.tz)
    try:
        shown = due.astimezone(zone) if isinstance(zone, ZoneInfo) else due
    except OverflowError:  # the last hours a datetime holds
        shown = due
    late = max(int((now - due).total_seconds()), 0)
    if record.created_by is CreatedBy.OWNER:
        who = "set by the owner"
    else:
        turn = f" in turn {record.turn}" if record.turn is not None else ""
        who = f"set by you, the agent,{turn}: the words below are your own, not the owner's"
        if record.tainted:
            who += ", written while the conversation held an untrusted result"
    return (
        f"[A scheduled message ({record.id}, {record.when}), {who}. Due "
        f"{shown:%Y-%m-%d %H:%M:%S} {record.tz}; it starts {_late(late)}.]"
    )


def _late(seconds: int) -> str:
    if seconds < 1:
        return "on time"
    if seconds < 120:
        return f"{seconds} s late"
    if seconds < 7200:
        return f"{seconds // 60} min late"
    return f"{seconds // 3600} h late"


class Plan:
    """The scheduler's state: the file as read (`take`), and what loopd holds in memory of the
    due times it has dealt with, the turns that run, and the starts the bounds count."""

    def __init__(self, bounds: SchedulesConfig) -> None:
        self.book = Book()
        self.bounds = bounds
        self.running: dict[str, datetime] = {}  # schedule -> the due time whose turn runs
        self._floor: dict[str, datetime] = {}  # due times up to here are dealt with
        self._after: dict[str, list[FiredRecord]] = {}  # `overlap`s, after the running one's
        self._starts: deque[float] = deque()  # ticks of the starts in the last hour
        self._session_start: dict[SessionId, float] = {}
        self._next: dict[str, tuple[datetime, datetime | None]] = {}  # floor -> its next due
        self._whens: dict[str, tuple[When, ZoneInfo] | None] = {}
        # The earliest next due time of them all, kept until something changes: an idle pass
        # over 1,000 schedules is then one comparison (`make bench`, "loopd idle").
        self._soonest: datetime | object | None = _STALE
        self._now: datetime | None = None  # the wall clock at the last pass
        self._anchor: dict[str, datetime] = {}  # where a schedule goes on after a clock set back

    def take(self, records: list[SchedulesRecord], *, whole: bool = False) -> None:
        """What the file gained; `whole`: the file as read from its start (another file)."""
        if whole:
            self.book, self._next, self._whens = Book(), {}, {}
        for record in records:
            self.book.take(record)
        self._soonest = _STALE

    def start(self, now: datetime, tick: float) -> list[Fire | Held]:
        """The first pass after loopd starts (and its `fired` records are reconciled): a
        schedule's times that fell due while it was down fire once, or not (`catch_up`)."""
        return self._pass(now, tick, starting=True)

    def due(self, now: datetime, tick: float) -> list[Fire | Held]:
        """What falls due by `now`."""
        return self._pass(now, tick, starting=False)

    def ended(self, fired: FiredRecord) -> list[FiredRecord]:
        """A firing's turn ended with `fired`: the records to append, its own and then the
        `overlap`s held behind it."""
        self.running.pop(fired.id, None)
        self._soonest = _STALE
        return [fired, *self._after.pop(fired.id, [])]

    def wake(self, now: datetime, tick: float) -> float | None:
        """Seconds from `now` to the next due time of a schedule that may fire (None: none)."""
        self._saw(now)
        earliest = self._earliest()
        if earliest is None or earliest > now:
            return None if earliest is None else (earliest - now).total_seconds()
        soonest: float | None = None  # one is due, maybe waiting its second in its session
        for entry in self._active():
            due = self._next_due(entry)
            if due is None:
                continue
            wait = max((due - now).total_seconds(), 0.0)
            session = entry.record.session
            if session is not None and session in self._session_start:
                wait = max(wait, self._session_start[session] + SESSION_GAP - tick)
            soonest = wait if soonest is None else min(soonest, wait)
        return soonest

    def _earliest(self) -> datetime | None:
        if self._soonest is _STALE:
            dues = [due for e in self._active() if (due := self._next_due(e)) is not None]
            self._soonest = min(dues, default=None)
        return self._soonest  # type: ignore[return-value]

    def _active(self) -> list[Entry]:
        return [entry for entry in self.book.live() if entry.paused is None]

    def _floor_of(self, entry: Entry) -> datetime:
        id, dealt = entry.record.id, self._floor.get(entry.record.id)
        floor = entry.since if dealt is None else max(dealt, entry.since)
        now = self._now
        if now is None or floor <= now + CLOCK_SLACK:
            return floor
        # A due time that fired under a wall clock since set back by more than a day (a
        # machine that woke in the wrong year): the schedule goes on from what this loopd
        # dealt with since, else from when it first saw the clock so.
        if dealt is not None and dealt <= now + CLOCK_SLACK:
            return dealt
        return self._anchor.setdefault(id, now)

    def _saw(self, now: datetime) -> None:
        """The wall clock of a pass: set back by more than a day, every next due time is
        found again."""
        if self._now is not None and now < self._now - CLOCK_SLACK:
            self._soonest = _STALE
            self._next.clear()
        self._now = now

    def _when(self, entry: Entry) -> tuple[When, ZoneInfo] | None:
        """The schedule's `when` and zone, read once (None: the file holds one that is not
        a when, which no writer makes: it never fires)."""
        id = entry.record.id
        if id not in self._whens:
            zone = zone_of(entry.record.tz)
            made = entry.record.time.value
            when = parse_when(entry.record.when, zone, made) if isinstance(zone, ZoneInfo) else ""
            read = isinstance(when, When) and isinstance(zone, ZoneInfo)
            self._whens[id] = (when, zone) if read else None  # type: ignore[assignment]
        return self._whens[id]

    def _next_due(self, entry: Entry) -> datetime | None:
        read = self._when(entry)
        if read is None:
            return None
        floor = self._floor_of(entry)
        cached = self._next.get(entry.record.id)
        if cached is None or cached[0] != floor:
            cached = (floor, due_after(read[0], read[1], entry.record.time.value, floor))
            self._next[entry.record.id] = cached
        return cached[1]

    def _pass(self, now: datetime, tick: float, *, starting: bool) -> list[Fire | Held]:
        while self._starts and self._starts[0] <= tick - HOUR:
            self._starts.popleft()
        self._saw(now)
        earliest = self._earliest()
        if earliest is None or earliest > now:
            return []
        actions: list[Fire | Held] = []
        for entry in self._active():
            first = self._next_due(entry)
            if first is None or first > now:
                continue
            read = self._when(entry)
            assert read is not None
            latest = due_at_or_before(read[0], read[1], entry.record.time.value, now) or first
            action = self._deal(entry, latest, now, tick, starting=starting)
            if action is not None:
                actions.append(action)
        return actions

    def _deal(
        self, entry: Entry, due: datetime, now: datetime, tick: float, *, starting: bool
    ) -> Fire | Held | None:
        record, stamp = entry.record, Timestamp(now)
        self._soonest = _STALE
        if starting and record.catch_up is CatchUp.SKIP:
            self._floor[record.id] = due
            return None
        session = record.session or firing_session(record.id, due)
        last = self._session_start.get(session)
        if last is not None and tick - last < SESSION_GAP:
            return None  # its second comes (`wake` says when)
        self._floor[record.id] = due
        if record.id in self.running:
            # One `overlap` is kept, of the latest due time: they never pile up.
            self._after[record.id] = [FiredRecord(stamp, record.id, Timestamp(due), Fired.OVERLAP)]
            return None
        if len(self._starts) >= self.bounds.max_scheduled_turns_per_hour:
            why = (
                f"{self.bounds.max_scheduled_turns_per_hour} scheduled turns started in the "
                "last hour ([schedules] max_scheduled_turns_per_hour)"
            )
            return Held(
                FiredRecord(stamp, record.id, Timestamp(due), Fired.PAUSED),
                PauseRecord(stamp, record.id, why),
            )
        self._starts.append(tick)
        self._session_start[session] = tick
        self.running[record.id] = due
        return Fire(
            record.id,
            due,
            session,
            f"{header(entry, due, now)}\n\n{record.message}",
            record.new_session,
            record.identity,
            record.tainted,
        )
