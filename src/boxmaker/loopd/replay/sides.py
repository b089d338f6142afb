"""A turn of a recorded conversation beside the same turn of a what-if (`bxctl replay
--with`): what each answered, called, cost and how it ended. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from ...proto import AssistantRecord, Baseline, LogRecord, TurnEndRecord, UsageRecord
from ...session import calls_of

__all__ = ["TurnSide", "WhatIf", "recorded_side"]


@frozen
class TurnSide:
    """One turn of one side: its answer, the tools it called, the tokens its requests
    processed and took from the cache, its time and how it ended."""

    answer: str
    tools: tuple[str, ...]
    processed: int
    reused: int
    ms: int
    outcome: str


@frozen
class WhatIf:
    session: str  # the recorded one
    made: str  # the what-if session
    changed: str  # what was changed: `profile=...`, `server=...`, `config=...`
    turns: tuple[tuple[str, TurnSide, TurnSide], ...]  # the message, recorded, what-if


def recorded_side(records: Sequence[LogRecord], baseline: Baseline | None = None) -> TurnSide:
    """A turn's side from its records (its user record to its turn_end); with the session's
    `baseline`, a fenced session's tool blocks are its calls."""
    answers = [r for r in records if isinstance(r, AssistantRecord)]
    usages = [r for r in records if isinstance(r, UsageRecord)]
    end = next((r for r in reversed(records) if isinstance(r, TurnEndRecord)), None)
    return TurnSide(
        answer=(answers[-1].content or "") if answers else "",
        tools=tuple(c.name for a in answers for c in calls_of(a, baseline)),
        processed=sum(u.prompt_n for u in usages),
        reused=sum(u.cache_n for u in usages),
        ms=end.ms if end is not None else 0,
        outcome=end.outcome.value if end is not None else "unended",
    )
