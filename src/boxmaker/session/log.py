"""Reading a session log: every line a complete, known record in its place in the hash chain,
or an error naming the line.

A line that is not JSON, not a known record, not the shape of one, or that breaks the chain
(`chain.py`) is refused, wherever it is: the error names the file and the line, and the file is
left as it is. A last line without its newline is what a write cut short leaves (loopd killed
while the kernel copied it, a power cut): `finished_writes` tells where the log's finished
writes end, and the store sets the rest aside, saying so. `header` tells what an epoch's log
says of itself in its first lines (`epochs.py` draws the layout). Pure.
"""

from __future__ import annotations

import copy
import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from ..proto import (
    AssistantRecord,
    DecodeError,
    EpochStartRecord,
    LogRecord,
    SessionStartRecord,
    SummaryRecord,
    TurnEndRecord,
    parse_json,
    parse_line,
    plain_record,
    record_of,
)
from .chain import NO_LINK, Link, chain_break
from .errors import ChainBroken, TornLog

__all__ = [
    "Header",
    "Log",
    "finished_writes",
    "header",
    "parse_log",
    "parse_more",
    "session_start",
]


@frozen
class Log:
    """A log's records, where its chain ends (what the next line follows), the index of its
    first chained record (`len(records)` when none is: a log written before the chain), and
    where its last `turn_end` line is (`Link(0, "")` when it has none)."""

    records: list[LogRecord]
    link: Link
    chained_from: int
    last_turn_end: Link = NO_LINK


@frozen
class Header:
    """What an epoch's log says of itself: its number, its `epoch_start` (None in epoch 0),
    `carried_from`, the index of its first carried record (after the summaries it opens
    with), and `own_from`, the index of its first own record (after the turns it carries):
    the records before it were written in an earlier epoch's terms."""

    epoch: int
    start: EpochStartRecord | None
    carried_from: int
    own_from: int


def header(records: Sequence[LogRecord]) -> Header:
    """The header of an epoch's records (the first is its `session_start`)."""
    first = records[0]
    assert isinstance(first, SessionStartRecord)
    start = records[1] if len(records) > 1 else None
    if not isinstance(start, EpochStartRecord):
        return Header(first.epoch, None, 1, 1)
    at = 2
    while at < len(records) and type(records[at]) is SummaryRecord:
        at += 1
    carried_from, left = at, start.carried_turns
    while left and at < len(records):
        left -= type(records[at]) is TurnEndRecord
        at += 1
    return Header(first.epoch, start, carried_from, at)


def line_record(line: bytes) -> LogRecord:
    """The record of one log line (without its newline), its chain members set aside; the
    chain itself is not checked (`parse_log` does).

    Raises:
        DecodeError: the line is not a record.
    """
    value = parse_json(line)
    if type(value) is dict:
        for key in ("seq", "prev", "hash"):
            value.pop(key, None)
    return record_of(value)


def session_start(data: bytes, path: Path) -> SessionStartRecord:
    """The log's first record, read alone (its chain is checked with the rest by `parse_log`).

    Raises:
        TornLog: the first line is not a whole `session_start` record.
    """
    first = data[: data.find(b"\n") + 1]
    if not first:
        reason = "the last line has no newline (a torn write)" if data else "the log is empty"
        raise TornLog(path, 1, f"{reason}; its first line must be a whole session_start")
    try:
        record = line_record(first[:-1])
    except DecodeError as exc:
        raise TornLog(path, 1, f"not a log record: {exc}") from exc
    if not isinstance(record, SessionStartRecord):
        raise TornLog(path, 1, "the first line must be session_start")
    return record


def finished_writes(data: bytes, path: Path, genesis: str) -> tuple[Log, int]:
    """The log of the finished writes, and the offset where they end (`len(data)` unless the
    last write was cut short).

    A write cut short is a last line without its newline; an `assistant` record just before
    it went out in that same write (its `usage` always follows it in one write), so it is not
    a finished write either. Such a write was never fsynced, so never acknowledged.

    Raises:
        TornLog: anything else wrong, as `parse_log` says.
    """
    end = data.rfind(b"\n") + 1
    if end == len(data) or end == 0:
        return parse_log(data, path, genesis), len(data)
    # Each line is read once: where the chain stood before the last whole line is kept, in
    # case that line is an `assistant` record, which goes with the cut write.
    last = data.rfind(b"\n", 0, end - 1) + 1
    reader = _Reader(path, genesis)
    reader.read(data[:last])
    before = copy.copy(reader)
    before.unchained = reader.unchained.copy()
    reader.read(data[last:end])
    if isinstance(reader.records[-1], AssistantRecord):
        del reader.records[-1]  # `before.records` is the same list
        return before.log(), last
    return reader.log(), end


def parse_log(data: bytes, path: Path, genesis: str, *, fast: bool = True) -> Log:
    """The records of a log file's bytes; the first is always `session_start`. `genesis` is
    the SHA-256 of the epoch's baseline file, which the first line's `prev` must be.

    `fast=False` reads every line the detailed way, which the fast path must always agree
    with (the tests compare the two); both give the same records and the same errors.

    Raises:
        TornLog: naming `path`, the line number and what is wrong with that line
            (`ChainBroken` when it breaks the chain).
    """
    if not data:
        raise TornLog(path, 1, "the log is empty; its first line must be session_start")
    reader = _Reader(path, genesis, fast=fast)
    reader.read(data)
    return reader.log()


def parse_more(data: bytes, path: Path, after: Link) -> Log:
    """The records of the whole lines `data` holds, which follow the chained line `after`
    (its number and hash) of a log read before: what a reader that keeps its place (the
    recall index) reads as the log grows. The log's `chained_from` is 0 and its records'
    lines are numbered from `after.seq + 1`.

    Raises:
        TornLog: as `parse_log` says (`ChainBroken` when the first line does not follow
            `after`: the log was replaced or rewritten since).
    """
    reader = _Reader(path, after.hash, first=after.seq)
    reader.chained_from = 0
    reader.read(data)
    return reader.log()


class _Reader:
    """Reads a log's lines in order (`read`, once or more), keeping its records and where its
    chain ends; `log` is what it has read so far.

    Strategy: a line is read the fast way when it can be, and the detailed way (`_line`, the
    one that words every error) when it cannot; the fast way changes nothing until the whole
    line has passed, so the detailed way starts afresh. The fast way parses a chained line
    with `proto.parse_line` (orjson, which refuses what is not strict JSON: bad UTF-8, a lone
    surrogate, NaN), checks its chain members as the detailed way does, and builds the rest
    only when it is exactly a record's plain shape (`proto.plain_record`: exact types, so a
    number past 64 bits, which orjson reads as a float, and anything deeply nested, go the
    detailed way). What the fast way accepts the detailed way reads the same; the tests hold
    the two equal.
    """

    def __init__(self, path: Path, genesis: str, *, fast: bool = True, first: int = 0) -> None:
        self.path = path
        self.fast = fast
        self.first = first  # lines before the first read (by `parse_more`)
        self.records: list[LogRecord] = []
        self.last_seq, self.last_hash = first, genesis  # the chain's end so far
        self.last_turn_end = NO_LINK
        self.chained_from: int | None = None
        self.unchained = hashlib.sha256()  # the bytes of the lines written before the chain

    def log(self) -> Log:
        records = self.records
        if self.chained_from is None:
            return Log(records, Link(len(records), self.unchained.hexdigest()), len(records))
        link = Link(self.last_seq, self.last_hash)
        return Log(records, link, self.chained_from, self.last_turn_end)

    def read(self, data: bytes) -> None:
        """Read the lines of `data`, which follow those read before.

        Raises:
            TornLog: as `parse_log` says.
        """
        path, records, fast = self.path, self.records, self.fast
        last_seq, last_hash, last_turn_end = self.last_seq, self.last_hash, self.last_turn_end
        number = self.first + len(records)
        # One line at a time (not `split`), so a long log is not held twice while it is read.
        for line in io.BytesIO(data):
            number += 1
            if line[-1:] != b"\n":
                raise TornLog(path, number, "the last line has no newline (a torn write)")
            record: LogRecord | None = None
            if fast and self.chained_from is not None:
                value = parse_line(line)
                if type(value) is dict and "seq" in value:
                    seq, prev = value.pop("seq"), value.pop("prev", None)
                    digest = value.pop("hash", None)
                    if chain_break(line[:-1], seq, prev, digest, last_seq, last_hash) is None:
                        record = plain_record(value)
                        if record is not None:
                            last_seq, last_hash = seq, digest
            if record is None:
                record, last_seq, last_hash = self._line(line, number, last_seq, last_hash)
            if (number == 1) != (type(record) is SessionStartRecord):
                where = "the first line must be" if number == 1 else "only the first line may be"
                raise TornLog(path, number, f"{where} session_start")
            if type(record) is TurnEndRecord:
                last_turn_end = Link(last_seq, last_hash)
            records.append(record)
        self.last_seq, self.last_hash, self.last_turn_end = last_seq, last_hash, last_turn_end

    def _line(
        self, line: bytes, number: int, last_seq: int, last_hash: str
    ) -> tuple[LogRecord, int, str]:
        """One line read the detailed way: its record and the chain's new end.

        Raises:
            TornLog: naming the line and what is wrong with it.
        """
        path, body = self.path, line[:-1]
        try:
            value = parse_json(body)
        except DecodeError as exc:
            raise TornLog(path, number, f"not a log record: {exc}") from exc
        if type(value) is dict and "seq" in value:
            if self.chained_from is None:
                self.chained_from = number - 1
                if number > 1:
                    last_hash = self.unchained.hexdigest()
            seq, digest = value.pop("seq"), value.pop("hash", None)
            broken = chain_break(body, seq, value.pop("prev", None), digest, last_seq, last_hash)
            if broken is not None:
                raise ChainBroken(path, number, *broken)
            last_seq, last_hash = seq, digest
        elif self.chained_from is not None:
            raise ChainBroken(path, number, "hash_mismatch", "the line has no seq, prev or hash")
        else:
            last_seq = number
            self.unchained.update(line)
        try:
            record = record_of(value)
        except DecodeError as exc:
            raise TornLog(path, number, f"not a log record: {exc}") from exc
        return record, last_seq, last_hash
