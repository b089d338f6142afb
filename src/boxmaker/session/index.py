"""A session's index, `<id>/index.json`: what `bxctl sessions` lists without reading the log,
and the outside count that `bxctl verify` compares the log with. Pure.

The log is the state; the index is derived from it, rewritten after every turn's end. Its
`seq` and `hash` name the last `turn_end` line written: a log whose chain is whole but which
no longer holds that line (its end cut off) is caught by it, which the chain alone cannot do.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from attrs import frozen

from ..proto import (
    LogRecord,
    Outcome,
    SessionId,
    SessionStartRecord,
    Timestamp,
    TurnEndRecord,
    UsageRecord,
    UserRecord,
)
from .chain import Link

__all__ = ["FIRST_WORDS", "Index", "first_words", "index_of"]

FIRST_WORDS = 60  # characters of the first user message kept in the index


@frozen
class Index:
    """`turns` ended turns, `done` of them answered; `tokens` the size of the conversation
    the last completion saw (prompt and answer); `first` the first words of its first user
    message; `seq` and `hash` the last `turn_end` line (0 and "" before the first)."""

    session: SessionId
    created: Timestamp
    last_turn: Timestamp | None = None
    turns: int = 0
    done: int = 0
    tokens: int = 0
    first: str = ""
    seq: int = 0
    hash: str = ""

    def after(self, record: LogRecord, link: Link) -> Index:
        """The index once `record` is written at `link` (its line's number and hash)."""
        match record:
            case TurnEndRecord(time=time, outcome=outcome):
                done = self.done + (outcome is Outcome.DONE)
                return attrs.evolve(
                    self, last_turn=time, turns=self.turns + 1, done=done,
                    seq=link.seq, hash=link.hash,
                )  # fmt: skip
            case UserRecord(content=content) if not self.first:
                return attrs.evolve(self, first=first_words(content))
            case UsageRecord(cache_n=cache_n, prompt_n=prompt_n, predicted_n=predicted_n):
                return attrs.evolve(self, tokens=cache_n + prompt_n + predicted_n)
        return self


def first_words(text: str) -> str:
    """One line of at most `FIRST_WORDS` characters, cut at a space where there is one."""
    flat = " ".join(text.split())
    if len(flat) <= FIRST_WORDS:
        return flat
    cut = flat[: FIRST_WORDS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def index_of(records: Sequence[LogRecord], last_turn_end: Link) -> Index:
    """The index of a log's records (the first is its `session_start`); `last_turn_end` is
    where its last `turn_end` line is (as `parse_log` found it)."""
    start = records[0]
    assert isinstance(start, SessionStartRecord)
    turns = done = tokens = 0
    first, last_turn = "", None
    for record in records:  # one pass, no object per record: resume reads 10⁵ of them
        if isinstance(record, TurnEndRecord):
            turns += 1
            done += record.outcome is Outcome.DONE
            last_turn = record.time
        elif isinstance(record, UsageRecord):
            tokens = record.cache_n + record.prompt_n + record.predicted_n
        elif isinstance(record, UserRecord) and not first:
            first = first_words(record.content)
    return Index(
        start.session, start.time, last_turn, turns, done, tokens, first,
        last_turn_end.seq, last_turn_end.hash,
    )  # fmt: skip
