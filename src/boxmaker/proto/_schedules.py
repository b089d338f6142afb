"""The lines of `<home>/schedules.jsonl`: the schedules that post turns into sessions at their
times (SPEC section 19). Append only, hash-chained as the notes are: a schedule is never
changed; its cancel, its pauses and resumes, and each of its firings are lines of their own.
"""

from __future__ import annotations

import enum
import re

from attrs import Attribute, field, frozen

from ._ids import InvalidValue, SessionId, Timestamp

__all__ = [
    "CancelRecord",
    "CatchUp",
    "CreatedBy",
    "Fired",
    "FiredRecord",
    "PauseRecord",
    "ResumeRecord",
    "ScheduleRecord",
    "SchedulesRecord",
    "check_schedule_id",
]

_OMIT = {"omit_if_default": True}
_SCHEDULE_ID = re.compile(r"s[1-9][0-9]{0,17}")


def check_schedule_id(_instance: object, attribute: Attribute[str], value: str) -> None:
    if type(value) is not str or not _SCHEDULE_ID.fullmatch(value):
        raise InvalidValue(f"{value!r} is not a schedule id (s1, s2, ...)", attribute.name)


class CatchUp(enum.Enum):
    """What a schedule does with the times that fell due while loopd was down."""

    ONCE = "once"  # the latest of them fires once, late
    SKIP = "skip"  # none fires


class CreatedBy(enum.Enum):
    OWNER = "owner"  # bxctl schedule add
    AGENT = "agent"  # the model's `schedule` tool (the owner approved it)


class Fired(enum.Enum):
    """What became of one due time."""

    RAN = "ran"  # its turn ran (or its message waited in the mailbox and then ran)
    BUSY = "busy"  # the session's mailbox was full
    OVERLAP = "overlap"  # the schedule's previous turn was still running or waiting
    PAUSED = "paused"  # held back by a bound (the hourly one): the schedule is paused
    GONE = "gone"  # the session is gone (or is another session of that id): paused
    FAILED = "failed"  # its message never reached the log (too long, a disk that refused)


@frozen
class ScheduleRecord:
    """A schedule made: its id (`s<number>`, in the order made); the session its turns go to
    and that session's identity (the SHA-256 of its first line: a session made again under
    the id is not this schedule's), or none with `new_session` (each firing a session of its
    own); `when` (`cron M H DoM Mon DoW`, `at <ISO time>` or `every <duration>`), read in the
    IANA zone `tz`; the message; `catch_up`; who made it (and, for the agent, in which turn);
    `tainted` when it was made while that conversation held an untrusted result (its turns
    then run tainted)."""

    time: Timestamp
    id: str = field(validator=check_schedule_id)
    when: str
    tz: str
    message: str
    catch_up: CatchUp
    created_by: CreatedBy
    session: SessionId | None = field(default=None, metadata=_OMIT)
    identity: str = field(default="", metadata=_OMIT)
    new_session: bool = field(default=False, metadata=_OMIT)
    turn: int | None = field(default=None, metadata=_OMIT)
    tainted: bool = field(default=False, metadata=_OMIT)


@frozen
class CancelRecord:
    """A schedule withdrawn (`bxctl schedule rm`, `cancel_schedule`): it never fires again."""

    time: Timestamp
    id: str = field(validator=check_schedule_id)
    session: SessionId | None = field(default=None, metadata=_OMIT)  # the model's, if it did


@frozen
class PauseRecord:
    """A schedule paused: by the owner (no `why`), or by loopd, saying why (its session is
    gone, the hourly bound)."""

    time: Timestamp
    id: str = field(validator=check_schedule_id)
    why: str = field(default="", metadata=_OMIT)


@frozen
class ResumeRecord:
    """A paused schedule resumed by the owner: it fires from its next time after now."""

    time: Timestamp
    id: str = field(validator=check_schedule_id)


@frozen
class FiredRecord:
    """What became of one due time of a schedule (written once per due time that fired or
    was held back; a time `catch_up = skip` passed over has none): `due` is the time it was
    due, `turn` the session's turn it ran as, when known, `session` the session of a
    `new_session` schedule's firing, `why` what the channel was told of a `failed` one."""

    time: Timestamp
    id: str = field(validator=check_schedule_id)
    due: Timestamp
    outcome: Fired
    turn: int | None = field(default=None, metadata=_OMIT)
    session: SessionId | None = field(default=None, metadata=_OMIT)
    why: str = field(default="", metadata=_OMIT)


SchedulesRecord = ScheduleRecord | CancelRecord | PauseRecord | ResumeRecord | FiredRecord
