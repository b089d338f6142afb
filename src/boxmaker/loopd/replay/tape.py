"""A recorded session as replay reads it (SPEC section 20): its records epoch by epoch, the
runs of the loop that wrote them (a turn each), and the clock's readings. Pure.

A *place* is a record's epoch and index in that epoch's log (its line is the index + 1). A
*run* is one `run_turn`: its message is a `user` record that starts a turn (not a soft
break's, and not one of a new epoch's carried turns); it ends at its own `turn_end`, or,
when loopd stopped in the middle of it, with its last record before the `interrupted`
results and `turn_end` that healing wrote later.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from attrs import frozen

from ...proto import (
    ApprovalRecord,
    LogRecord,
    Outcome,
    Timestamp,
    ToolResultRecord,
    TurnEndRecord,
    UserRecord,
)
from ...session import INTERRUPTED, header, starts_turn, turn_starts

__all__ = ["Place", "Run", "Tape"]

Place = tuple[int, int]  # (epoch, index)


@frozen
class Run:
    """One run of the loop: where its message is, its own `turn_end` (None when loopd
    stopped in the middle of it), and its last record."""

    number: int  # 1 for the session's first
    user: Place
    end: Place | None
    last: Place
    cut: Place | None = None  # where it was cut from outside (the first record after)

    @property
    def crashed(self) -> bool:
        return self.end is None


class Tape:
    """The recorded session: `epochs[e]` is epoch `e`'s records, `lines[e]` their bytes."""

    def __init__(self, epochs: Sequence[Sequence[LogRecord]], lines: Sequence[Sequence[bytes]]):
        self.epochs = [tuple(records) for records in epochs]
        self.lines = [tuple(each) for each in lines]
        self.runs = tuple(self._runs())

    def at(self, place: Place) -> LogRecord | None:
        """The record at `place` (None past its epoch's end)."""
        epoch, index = place
        if epoch >= len(self.epochs) or index >= len(self.epochs[epoch]):
            return None
        return self.epochs[epoch][index]

    def readings(self, place: Place) -> Iterator[Timestamp]:
        """The clock's readings from the record at `place` on, in the order the loop reads
        them: one a record, but an `approval`'s two (when it was asked, then answered)."""
        epoch, index = place
        while epoch < len(self.epochs):
            records = self.epochs[epoch]
            for at in range(index, len(records)):  # no copy: a reading costs what it reads
                record = records[at]
                if isinstance(record, ApprovalRecord):
                    yield record.asked
                yield record.time
            epoch, index = epoch + 1, 0

    def _runs(self) -> Iterator[Run]:
        number = 0
        for epoch, records in enumerate(self.epochs):
            for index in turn_starts(records, header(records).own_from if records else 0):
                number += 1
                yield _run_from(records, epoch, index, number)


def _run_from(records: Sequence[LogRecord], epoch: int, index: int, number: int) -> Run:
    for at in range(index + 1, len(records)):
        record = records[at]
        if isinstance(record, UserRecord) and starts_turn(records, at):
            return _crashed(number, epoch, index, at - 1)  # never healed
        if not isinstance(record, TurnEndRecord):
            continue
        closing = at  # the records its end wrote: a hard break's, results, the turn_end
        while closing > index and _healing(records[closing - 1], record):
            closing -= 1
        if record.outcome is Outcome.INTERRUPTED:  # healing wrote them, after a crash
            return _crashed(number, epoch, index, closing - 1)
        cut = None
        if record.outcome in (Outcome.BREAK_HARD, Outcome.STOPPED):
            cut = (epoch, closing - 1)  # its `break`
        elif record.outcome is Outcome.CANCELLED:
            cut = (epoch, closing)
        return Run(number, (epoch, index), (epoch, at), (epoch, at), cut)
    return _crashed(number, epoch, index, len(records) - 1)


def _crashed(number: int, epoch: int, index: int, last: int) -> Run:
    return Run(number, (epoch, index), None, (epoch, last), (epoch, last + 1))


def _healing(record: LogRecord, end: TurnEndRecord) -> bool:
    return (
        isinstance(record, ToolResultRecord)
        and record.time == end.time
        and record.content == INTERRUPTED
    )
