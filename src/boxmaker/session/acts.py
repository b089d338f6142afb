"""The owner's acts between turns (SPEC section 21): the session's mode, and the undos the
next turn tells the model of. Pure.

A session's mode is its last `mode` record's, else the one its epoch opened in (its
`session_start`'s: a new session's from `[tools] mode`, a later epoch's carried from the one
before), else `auto`. An undo is told once, in the `note` of the first turn after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..proto import (
    LogRecord,
    Mode,
    ModeRecord,
    SessionStartRecord,
    TurnEndRecord,
    UndoRecord,
    UserRecord,
)

__all__ = ["mode_of", "undone_since_turn"]


def mode_of(records: Sequence[LogRecord]) -> Mode:
    """The mode an epoch's `records` leave the session in."""
    for record in reversed(records):
        if type(record) is ModeRecord:
            return record.mode
    start = records[0] if records else None
    if isinstance(start, SessionStartRecord) and start.mode is not None:
        return start.mode
    return Mode.AUTO


def undone_since_turn(records: Sequence[LogRecord]) -> list[UndoRecord]:
    """The undos written since the epoch's last turn (or its start), in order: the next
    turn's message tells the model of them."""
    undone: list[UndoRecord] = []
    for record in reversed(records):
        if type(record) is UndoRecord:
            undone.append(record)
        elif type(record) is TurnEndRecord or type(record) is UserRecord:
            break
    return undone[::-1]
