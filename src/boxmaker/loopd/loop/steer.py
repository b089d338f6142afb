"""Steering a running turn: the messages a turn takes between two steps, and the
record a hard break leaves.

The turn does not know where messages wait: it asks a `Steer` (the daemon's mailbox of the
session) at each step boundary — after a completion and its tool results, before the next
request — for the soft breaks waiting there, and writes each as a `break` record followed by
its `user` record, so the next request carries them. A hard break cancels the turn from
outside; `Steer.hard` then tells the turn's end that it was a break, not a cancel, and
`hard_break` records where it landed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ...clock import Clock
from ...proto import (
    Baseline,
    BreakAt,
    BreakRecord,
    LogRecord,
    MessageTaken,
    Origin,
    Timestamp,
    TurnEvent,
    UserRecord,
)
from ...session import dangling_calls
from ...store import OpenSession
from .limits import TurnLimits

__all__ = ["Message", "Steer", "hard_break", "take_messages"]

Message = tuple[str, Origin | None, bool]  # a soft break's content, its origin, untrusted


class Steer(Protocol):
    def take(self) -> Sequence[Message]:
        """The messages of the soft breaks waiting now, in order; each is taken (its channel
        now follows this turn) and the turn must record it."""
        ...

    @property
    def hard(self) -> bool:
        """Whether a hard break stopped the turn (its cancellation is a break)."""
        ...

    @property
    def stopped(self) -> bool:
        """Whether that break was a `stop`: a hard break with no message to run next."""
        ...


def take_messages(
    session: OpenSession,
    steer: Steer | None,
    limits: TurnLimits,
    on_event: Callable[[TurnEvent], None],
    clock: Clock,
) -> None:
    """Take the soft breaks waiting at this step boundary: a `break` and a `user` record each,
    in one write, with no checkpoint between taking and writing (a taken message is in the
    log before anything else can happen to the turn); then the runaway limits start afresh and the
    turn's channels hear `message_taken` once per message."""
    taken = steer.take() if steer is not None else ()
    if not taken:
        return
    now = clock.now()  # read only for records (replay answers each reading from the log)
    records: list[LogRecord] = []
    for content, origin, untrusted in taken:
        user = UserRecord(now, content, origin, untrusted)
        records += [BreakRecord(now, hard=False, at=BreakAt.STEP), user]
    session.append(*records)
    limits.message_taken()
    for _ in taken:
        on_event(MessageTaken())


def hard_break(
    turn: Sequence[LogRecord], now: Timestamp, baseline: Baseline | None = None
) -> BreakRecord:
    """The `break` of a turn that a hard break stopped, from its records so far: while its
    tool calls ran (some are left without a result), or while a completion was on its way.
    With the session's `baseline`, a fenced session's tool blocks are its tool calls."""
    at = BreakAt.TOOL if dangling_calls(turn, baseline) else BreakAt.COMPLETION
    return BreakRecord(now, hard=True, at=at)
