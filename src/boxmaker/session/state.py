"""What a session's records give, as one frozen value. Pure.

`SessionState` is everything derived from an epoch's log: its records, the next request's
messages, where the hash chain ends, the index, the next tool-call number, the last usage of
the epoch's own completions, the epoch's header, and how many bytes of log the records take.
It is made once from a log read back (`of`), and each write makes the next value from the
last (`sealed`): the lines to write and the state once they are written. Rolling back a write
is keeping the old value. Nothing here is ever changed in place.

A state holds its records and messages as tuples, so a new value copies them: a few tens of
microseconds for an epoch as long as a large context holds, against a request that encodes
every one of those messages anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve, frozen

from ..proto import (
    Baseline,
    ChatMessage,
    LogRecord,
    RecallRecord,
    ToolResultRecord,
    UsageRecord,
    dumps,
)
from .chain import Link, seal
from .index import Index, index_of
from .log import Header, Log, header
from .replay import messages_of, next_call, request_messages

__all__ = ["SessionState"]


@frozen
class SessionState:
    """An epoch's records and what derives from them (see the module's docstring).

    `chained_from` is the index of the first chained record (`len(records)` when none is: a
    log written before the chain); `size` the bytes of log the records take."""

    records: tuple[LogRecord, ...]
    messages: tuple[ChatMessage, ...]
    link: Link
    index: Index
    next_call: int
    last_usage: UsageRecord | None
    head: Header
    chained_from: int
    size: int

    @classmethod
    def of(cls, baseline: Baseline, log: Log, size: int) -> SessionState:
        """The state of an epoch's log read back (`size` bytes)."""
        records = tuple(log.records)
        head = header(records)
        # The cache is judged against the epoch's own completions only: a carried usage
        # record was made against another epoch's prompt.
        own = range(len(records) - 1, head.own_from - 1, -1)
        last_usage = next((r for at in own if isinstance(r := records[at], UsageRecord)), None)
        return cls(
            records=records,
            messages=request_messages(baseline, records),
            link=log.link,
            index=index_of(records, log.last_turn_end),
            next_call=next_call(records),
            last_usage=last_usage,
            head=head,
            chained_from=log.chained_from,
            size=size,
        )

    def sealed(
        self, records: Sequence[LogRecord], baseline: Baseline
    ) -> tuple[bytes, SessionState]:
        """The lines that append `records` to the log (each sealed into the chain) and the
        state once they are written."""
        link, index, lines = self.link, self.index, []
        said: list[ChatMessage] = []
        last_usage, calls = self.last_usage, self.next_call
        for record in records:
            line, link = seal(dumps(record), link)
            lines.append(line)
            index = index.after(record, link)
            said += messages_of(record, baseline.fenced)
            if isinstance(record, UsageRecord):
                last_usage = record
            elif isinstance(record, ToolResultRecord | RecallRecord):
                calls = max(calls, record.call + 1)
        data = b"".join(lines)
        return data, evolve(
            self,
            records=(*self.records, *records),
            messages=(*self.messages, *said),
            link=link,
            index=index,
            next_call=calls,
            last_usage=last_usage,
            size=self.size + len(data),
        )

    @property
    def epoch(self) -> int:
        return self.head.epoch
