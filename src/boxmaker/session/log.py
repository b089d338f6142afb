"""Reading a session log: every line a complete, known record in its place in the hash chain,
or an error naming the line.

A line that is not JSON, not a known record, not the shape of one, or that breaks the chain
(`chain.py`) is refused, wherever it is: the error names the file and the line, and the file is
left as it is. A last line without its newline is what a write cut short leaves (loopd killed
while the kernel copied it, a power cut): `finished_writes` tells where the log's finished
writes end, and the store sets the rest aside, saying so. Pure.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from attrs import frozen

from ..proto import (
    AssistantRecord,
    DecodeError,
    LogRecord,
    SessionStartRecord,
    TurnEndRecord,
    parse_json,
    record_of,
)
from .chain import NO_LINK, Link, problem
from .errors import ChainBroken, TornLog

__all__ = ["Log", "finished_writes", "parse_log", "session_start"]


@frozen
class Log:
    """A log's records, where its chain ends (what the next line follows), the index of its
    first chained record (`len(records)` when none is: a log written before the chain), and
    where its last `turn_end` line is (`Link(0, "")` when it has none)."""

    records: list[LogRecord]
    link: Link
    chained_from: int
    last_turn_end: Link = NO_LINK


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
        value = parse_json(first[:-1])
        if type(value) is dict:
            for key in ("seq", "prev", "hash"):
                value.pop(key, None)
        record = record_of(value)
    except DecodeError as exc:
        raise TornLog(path, 1, f"not a log record: {exc}") from None
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
    if isinstance(parse_log(data[:end], path, genesis).records[-1], AssistantRecord):
        end = data.rfind(b"\n", 0, end - 1) + 1
    return parse_log(data[:end], path, genesis), end


def parse_log(data: bytes, path: Path, genesis: str) -> Log:
    """The records of a log file's bytes; the first is always `session_start`. `genesis` is
    the SHA-256 of the epoch's baseline file, which the first line's `prev` must be.

    Raises:
        TornLog: naming `path`, the line number and what is wrong with that line
            (`ChainBroken` when it breaks the chain).
    """
    if not data:
        raise TornLog(path, 1, "the log is empty; its first line must be session_start")
    records: list[LogRecord] = []
    last_seq, last_hash = 0, genesis  # the chain's end so far
    last_turn_end = NO_LINK
    chained_from: int | None = None
    unchained = hashlib.sha256()  # the bytes of the lines written before the chain
    # One line at a time (not `split`), so a long log is not held twice while it is read.
    for number, line in enumerate(io.BytesIO(data), start=1):
        if line[-1:] != b"\n":
            raise TornLog(path, number, "the last line has no newline (a torn write)")
        body = line[:-1]
        try:
            value = parse_json(body)
        except DecodeError as exc:
            raise TornLog(path, number, f"not a log record: {exc}") from None
        if type(value) is dict and "seq" in value:
            if chained_from is None:
                chained_from = number - 1
                if number > 1:
                    last_hash = unchained.hexdigest()
            seq, digest = value.pop("seq"), value.pop("hash", None)
            broken = problem(body, seq, value.pop("prev", None), digest, last_seq, last_hash)
            if broken is not None:
                raise ChainBroken(path, number, *broken)
            last_seq, last_hash = seq, digest
        elif chained_from is not None:
            raise ChainBroken(path, number, "hash_mismatch", "the line has no seq, prev or hash")
        else:
            last_seq = number
            unchained.update(line)
        try:
            record = record_of(value)
        except DecodeError as exc:
            raise TornLog(path, number, f"not a log record: {exc}") from None
        if (number == 1) != (type(record) is SessionStartRecord):
            where = "the first line must be" if number == 1 else "only the first line may be"
            raise TornLog(path, number, f"{where} session_start")
        if type(record) is TurnEndRecord:
            last_turn_end = Link(last_seq, last_hash)
        records.append(record)
    if chained_from is None:
        return Log(records, Link(len(records), unchained.hexdigest()), len(records))
    return Log(records, Link(last_seq, last_hash), chained_from, last_turn_end)
