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
from .log import header

__all__ = ["FIRST_WORDS", "Index", "first_words", "index_of"]

FIRST_WORDS = 60  # characters of the first user message kept in the index


@frozen
class Index:
    """`turns` ended turns, `done` of them answered (in every epoch); `tokens` the size of
    the conversation the last completion saw (prompt and answer); `first` the first words of
    its first user message; `seq` and `hash` the last `turn_end` line of the current epoch's
    log (0 and "" before the first), `epoch` that epoch. `shown`: the last turn whose end a
    person saw (its answer reached a channel, or a watch, that was there; not derived from the
    log, but kept from one index to the next by loopd): `bxctl chat` shows the turns after it
    (a schedule's, while nobody watched) when it opens the session."""

    session: SessionId
    created: Timestamp
    last_turn: Timestamp | None = None
    turns: int = 0
    done: int = 0
    tokens: int = 0
    first: str = ""
    seq: int = 0
    hash: str = ""
    epoch: int = 0
    shown: int = 0

    def after(self, record: LogRecord, link: Link) -> Index:
        """The index once `record` is written at `link` (its line's number and hash)."""
        match record:
            case TurnEndRecord(time=time, outcome=outcome):
                done = self.done + (outcome is Outcome.DONE)
                return attrs.evolve(
                    self,
                    last_turn=time,
                    turns=self.turns + 1,
                    done=done,
                    seq=link.seq,
                    hash=link.hash,
                )
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
    """The index of an epoch's log's records (the first is its `session_start`);
    `last_turn_end` is where its last `turn_end` line is (as `parse_log` found it). What came
    before the epoch is in its `epoch_start`; the size of the conversation is that of the
    epoch's own last completion (a carried one saw another epoch's)."""
    start = records[0]
    assert isinstance(start, SessionStartRecord)
    head = header(records)
    opened = head.start
    turns, done = (opened.turns, opened.done) if opened else (0, 0)
    first, created = (opened.first, opened.created) if opened else ("", start.time)
    tokens = 0
    last_turn = None
    for at, record in enumerate(records):  # one pass, no object per record: 10⁵ of them
        if isinstance(record, TurnEndRecord):
            turns += 1
            done += record.outcome is Outcome.DONE
            last_turn = record.time
        elif isinstance(record, UsageRecord) and at >= head.own_from:
            tokens = record.cache_n + record.prompt_n + record.predicted_n
        elif isinstance(record, UserRecord) and not first:
            first = first_words(record.content)
    if last_turn is None and opened is not None:
        last_turn = opened.time  # the session's last activity: this epoch's opening
    return Index(
        start.session,
        created,
        last_turn,
        turns,
        done,
        tokens,
        first,
        last_turn_end.seq,
        last_turn_end.hash,
        head.epoch,
    )
