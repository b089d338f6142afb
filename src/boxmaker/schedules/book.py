"""The schedules as `schedules.jsonl` says now (`Book`, folded from its records in order), and
the records its writers make of it: the owner's (`bxctl schedule`) and the model's (brokerd's
`schedule`, `list_schedules`, `cancel_schedule`). Each decider gives the record to append, or,
as a string, why nothing is written. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from attrs import define, frozen

from ..config import SchedulesConfig
from ..proto import (
    CancelRecord,
    CatchUp,
    CreatedBy,
    FiredRecord,
    PauseRecord,
    ResumeRecord,
    ScheduleRecord,
    SchedulesRecord,
    SessionId,
    Timestamp,
)
from .when import due_after, parse_when, zone_of

CLOCK_SLACK = timedelta(days=1)  # a due time this far past the wall clock fired under a wrong one

__all__ = [
    "CLOCK_SLACK",
    "Book",
    "Entry",
    "Wanted",
    "cancelled",
    "made",
    "next_shown",
    "paused",
    "resumed",
]


@define
class Entry:
    """One schedule: as made, whether cancelled, its pause (None while it runs), when last
    resumed, and its `fired` record of the latest due time (loopd appends them in the order
    of their due times, one schedule at a time)."""

    record: ScheduleRecord
    cancelled: CancelRecord | None = None
    paused: PauseRecord | None = None
    resumed: datetime | None = None
    last: FiredRecord | None = None

    @property
    def live(self) -> bool:
        """Not cancelled, nor an `at` that has fired (a paused one is live: it counts, and
        may be resumed)."""
        once = self.record.when.startswith("at ")
        return self.cancelled is None and not (once and self.last is not None)

    def finished(self, now: datetime) -> bool:
        """Whether it fires no more: cancelled, or an `at` that fired or was passed over (its
        time past with `catch_up = skip`, or resumed after its time)."""
        if not self.live:
            return True
        if not self.record.when.startswith("at "):
            return False
        at = _at_of(self.record.when, now)
        return self.since >= at or (at <= now and self.record.catch_up is CatchUp.SKIP)

    @property
    def since(self) -> datetime:
        """What its next due time follows: the latest of when it was made, last resumed, and
        its latest due time that fired."""
        times = [self.record.time.value]
        if self.resumed is not None:
            times.append(self.resumed)
        if self.last is not None:
            times.append(self.last.due.value)
        return max(times)


class Book:
    """Every schedule of the file, by id, folded from its records in order."""

    def __init__(self, records: Iterable[SchedulesRecord] = ()) -> None:
        self.entries: dict[str, Entry] = {}
        self.made = 0  # schedule records: the next id is one more
        for record in records:
            self.take(record)

    def take(self, record: SchedulesRecord) -> None:
        """Fold one more record in (a record of an id never made is kept out: the file's
        writers never make one)."""
        if isinstance(record, ScheduleRecord):
            self.made += 1
            self.entries[record.id] = Entry(record)
            return
        entry = self.entries.get(record.id)
        if entry is None:
            return
        if isinstance(record, CancelRecord):
            entry.cancelled = record
        elif isinstance(record, PauseRecord):
            entry.paused = record
        elif isinstance(record, ResumeRecord):
            entry.paused, entry.resumed = None, record.time.value
        elif entry.last is None or record.due.value >= entry.last.due.value:
            entry.last = record

    def live(self) -> list[Entry]:
        return [entry for entry in self.entries.values() if entry.live]

    def of_session(self, sid: SessionId, identity: str) -> list[Entry]:
        """The live schedules of one session (its identity: not one made under its id before)."""
        return [e for e in self.live() if e.record.session == sid and e.record.identity == identity]

    def next_id(self) -> str:
        return f"s{self.made + 1}"


def _live(book: Book, id: str, session: SessionId | None) -> Entry | str:
    entry = book.entries.get(id)
    mine = entry is not None and (session is None or entry.record.session == session)
    if entry is None or not mine:
        return f"there is no schedule {id}" + (" of this session" if session else "")
    if entry.cancelled is not None:
        return f"schedule {id} was cancelled at {entry.cancelled.time}"
    return entry


def cancelled(
    book: Book, id: str, now: Timestamp, session: SessionId | None = None
) -> CancelRecord | str:
    """Cancel schedule `id`; `session`: the model's, which may cancel only its own."""
    entry = _live(book, id, session)
    return entry if isinstance(entry, str) else CancelRecord(now, id, session)


def paused(book: Book, id: str, now: Timestamp, why: str = "") -> PauseRecord | str:
    entry = _live(book, id, None)
    if isinstance(entry, str):
        return entry
    if entry.paused is not None:
        return f"schedule {id} is paused already"
    return PauseRecord(now, id, why)


def resumed(book: Book, id: str, now: Timestamp) -> ResumeRecord | str:
    entry = _live(book, id, None)
    if isinstance(entry, str):
        return entry
    if entry.paused is None:
        return f"schedule {id} is not paused"
    return ResumeRecord(now, id)


@frozen
class Wanted:
    """A schedule someone asks for: `when` as they wrote it, its zone, its message, what it
    does with times missed while loopd was down, who asks, and where its turns go (a session
    and its identity, or `new_session`); the model's turn, and whether its conversation holds
    an untrusted result."""

    when: str
    tz: str
    message: str
    created_by: CreatedBy
    session: SessionId | None = None
    identity: str = ""
    new_session: bool = False
    catch_up: CatchUp = CatchUp.ONCE
    turn: int | None = None
    tainted: bool = False


def made(
    book: Book, wanted: Wanted, now: Timestamp, bounds: SchedulesConfig
) -> ScheduleRecord | str:
    """The schedule `wanted` (the next id), or why none is made: an unknown zone, a when that
    is wrong or past, an empty message or one over `max_message_chars`, `max_schedules` live
    already."""
    zone = zone_of(wanted.tz)
    if not isinstance(zone, ZoneInfo):
        return zone
    when = parse_when(wanted.when, zone, now.value)
    if isinstance(when, str):
        return when
    if not wanted.message.strip():
        return "the message is empty"
    if len(wanted.message) > bounds.max_message_chars:
        return (
            f"the message is {len(wanted.message):,} characters; a schedule's message is at "
            f"most {bounds.max_message_chars:,} ([schedules] max_message_chars)"
        )
    if (wanted.session is None) == (not wanted.new_session):
        return "a schedule goes to one session, or to a new session each time"
    if sum(not entry.finished(now.value) for entry in book.live()) >= bounds.max_schedules:
        return (
            f"{bounds.max_schedules:,} schedules are live, as many as there may be "
            "([schedules] max_schedules): cancel one first"
        )
    return ScheduleRecord(
        now,
        book.next_id(),
        when.text,
        wanted.tz,
        wanted.message,
        wanted.catch_up,
        wanted.created_by,
        wanted.session,
        wanted.identity,
        wanted.new_session,
        wanted.turn,
        wanted.tainted,
    )


def next_shown(entry: Entry, now: datetime) -> str:
    """When `entry` falls due next after `now`, in its zone (`2026-12-07 07:00:00`), or why
    it does not."""
    record = entry.record
    if entry.cancelled is not None:
        return f"cancelled {str(entry.cancelled.time)[:16]}"
    if entry.paused is not None:
        return "paused" + (f": {entry.paused.why}" if entry.paused.why else "")
    zone = zone_of(record.tz)
    if isinstance(zone, str):
        return f"never: {zone}"
    when = parse_when(record.when, zone, record.time.value)
    if isinstance(when, str):
        return f"never: {when}"
    since = entry.since if entry.since <= now + CLOCK_SLACK else now  # a clock set back since
    due = due_after(when, zone, record.time.value, max(since, now))
    try:
        return "never again" if due is None else f"{due.astimezone(zone):%Y-%m-%d %H:%M:%S}"
    except OverflowError:  # the last hours a datetime holds
        return f"{due:%Y-%m-%d %H:%M:%S} UTC"


def _at_of(when: str, now: datetime) -> datetime:
    """The time of an `at` as written (`at <ISO time with offset>`); `now` if unreadable."""
    try:
        return datetime.fromisoformat(when[3:])
    except ValueError:
        return now
