"""What an epoch's log says of itself in its first lines (`epoch.py` tells the whole layout).
Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from ..proto import EpochStartRecord, LogRecord, SessionStartRecord, SummaryRecord, TurnEndRecord

__all__ = ["Header", "header"]


@frozen
class Header:
    """What an epoch's log says of itself: its number, its `epoch_start` (None in epoch 0),
    and `own_from`, the index of its first own record (after the summary and the turns it
    carries): the records before it were written in an earlier epoch's terms."""

    epoch: int
    start: EpochStartRecord | None
    own_from: int


def header(records: Sequence[LogRecord]) -> Header:
    """The header of an epoch's records (the first is its `session_start`)."""
    first = records[0]
    assert isinstance(first, SessionStartRecord)
    start = records[1] if len(records) > 1 else None
    if not isinstance(start, EpochStartRecord):
        return Header(first.epoch, None, 1)
    at = 3 if len(records) > 2 and type(records[2]) is SummaryRecord else 2
    left = start.carried_turns
    while left and at < len(records):
        left -= type(records[at]) is TurnEndRecord
        at += 1
    return Header(first.epoch, start, at)
