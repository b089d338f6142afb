"""A log as a person reads it: its turns, each with the user's message, the model's reasoning,
tool calls and their results, the messages it took on the way (soft breaks), the answer, and
the turn's figures. Pure.

A turn starts at a `user` record (but a soft break's) and ends at its `turn_end`. A log
written before `turn_end` existed has none: its turns' figures are summed from their
records, with outcome `None`. An epoch's view adds the summary it opened with and which of
its turns it carried.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import define, field, frozen

from ..proto import (
    AssistantRecord,
    Baseline,
    LogRecord,
    Outcome,
    RecallRecord,
    SummaryPart,
    Timestamp,
    ToolResultRecord,
    TurnEndRecord,
    TurnFile,
    UserRecord,
    WrapUpRecord,
    encode,
)
from .history import named, opening_parts
from .log import header
from .replay import calls_of, starts_turn, turn_end

__all__ = ["EpochView", "Taken", "ToolStep", "Turn", "epoch_view", "turns_of"]


@frozen
class ToolStep:
    """One tool call and its result (`None` when it has none in the log)."""

    name: str
    arguments: str
    result: str | None
    truncated: bool = False


@frozen
class Taken:
    """A message a soft break gave the turn, after its first `after` tool steps."""

    after: int
    content: str


@define
class Turn:
    """One turn of a log. `end` is its `turn_end`, or the figures summed from its records
    (outcome `None`: written before `turn_end` existed, or still running when read)."""

    number: int
    time: Timestamp
    user: str
    reasoning: list[str] = field(factory=list)
    steps: list[ToolStep] = field(factory=list)
    taken: list[Taken] = field(factory=list)
    answer: str | None = None
    end: TurnEndRecord | None = None
    outcome: Outcome | None = None
    records: list[LogRecord] = field(factory=list)
    wrapped_up: bool = False  # asked for a closing answer after one cut at max_tokens
    files: tuple[TurnFile, ...] = ()  # the files its message carried

    @property
    def figures(self) -> TurnEndRecord:
        """The turn's `turn_end`, or one summed from its records (its `ms` then 0)."""
        if self.end is not None:
            return self.end
        return turn_end(self.records, self.time, Outcome.DONE, 0)

    @property
    def reuse(self) -> float | None:
        """The share of the turn's prompt tokens the server took from its cache."""
        figures = self.figures
        whole = figures.cache_n + figures.prompt_n
        return figures.cache_n / whole if whole else None


def turns_of(
    records: Sequence[LogRecord], first: int = 1, baseline: Baseline | None = None
) -> list[Turn]:
    """The turns of a log's records, in order, numbered from `first` (records before the first
    `user`, such as `session_start`, belong to none). With the session's `baseline`, a fenced
    session's tool blocks are its tool calls."""
    turns: list[Turn] = []
    current: Turn | None = None
    calls: dict[str, ToolStep] = {}
    for at, record in enumerate(records):
        if isinstance(record, UserRecord) and current is not None and not starts_turn(records, at):
            current.taken.append(Taken(len(current.steps), record.content))
        elif isinstance(record, UserRecord):
            current = Turn(len(turns) + first, record.time, record.content, files=record.files)
            turns.append(current)
            calls = {}
        if current is None:
            continue
        current.records.append(record)
        match record:
            case AssistantRecord(content=content, reasoning_content=reasoning):
                if reasoning:
                    current.reasoning.append(reasoning)
                made = calls_of(record, baseline)
                for call in made:
                    calls[call.id] = ToolStep(call.name, call.arguments, None)
                    current.steps.append(calls[call.id])
                if not made:
                    current.answer = content
            case ToolResultRecord(tool_call_id=call_id, content=content, truncated=truncated):
                step = calls.get(call_id)
                if step is not None:
                    index = current.steps.index(step)
                    current.steps[index] = calls[call_id] = ToolStep(
                        step.name, step.arguments, content, truncated
                    )
            case RecallRecord(query=query, content=content):  # auto-recall, as a step
                arguments = encode({"query": query}).decode()
                current.steps.append(ToolStep("recall", arguments, content))
            case WrapUpRecord():
                current.wrapped_up = True
            case TurnEndRecord(outcome=outcome):
                current.end, current.outcome = record, outcome
                current = None
    return turns


def _shown(part: SummaryPart, count: int) -> str:
    """A summary as `bxctl show` gives it: alone, its text; among others, which parts of the
    conversation (epochs, from 1) it covers first."""
    if count == 1:
        return part.text
    return f"[{named(part)}, level {part.level}] {part.text}"


@frozen
class EpochView:
    """One epoch as a person reads it: its number, the summaries it opened with (without their
    prefaces; None when it has none, or for epoch 0), how many of its first turns it carried
    from the epoch before, and its turns, numbered in the whole session."""

    epoch: int
    summary: str | None
    carried: int
    turns: list[Turn]

    @property
    def own(self) -> list[Turn]:
        """Its own turns, not the copies it carried."""
        return self.turns[self.carried :]


def epoch_view(records: Sequence[LogRecord], baseline: Baseline | None = None) -> EpochView:
    """The view of an epoch's log's records (the first is its `session_start`); with the
    session's `baseline`, a fenced session's tool blocks are its tool calls."""
    head = header(records)
    opened = head.start
    parts = opening_parts(records, head)
    text = "\n\n".join(_shown(part, len(parts)) for part in parts) or None
    first = opened.turns + 1 if opened else 1
    carried = opened.carried_turns if opened else 0
    return EpochView(head.epoch, text, carried, turns_of(records, first, baseline))
