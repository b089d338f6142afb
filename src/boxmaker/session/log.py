"""Reading a session log: every line a complete, known record, or an error naming the line.

A line that is not JSON, not a known record or not the shape of one is refused, wherever it
is: the error names the file and the line, and the file is left as it is. A last line without
its newline is what a write cut short leaves (loopd killed while the kernel copied it, a power
cut): `finished_writes` tells where the log's finished writes end, and the store sets the rest
aside, saying so. Pure.
"""

from __future__ import annotations

import io
from pathlib import Path

from ..proto import AssistantRecord, DecodeError, LogRecord, SessionStartRecord, load_record
from .errors import TornLog

__all__ = ["finished_writes", "parse_log"]


def finished_writes(data: bytes, path: Path) -> tuple[list[LogRecord], int]:
    """The records of the log's finished writes, and the offset where they end (`len(data)`
    unless the last write was cut short).

    A write cut short is a last line without its newline; an `assistant` record just before
    it went out in that same write (its `usage` always follows it in one write), so it is not
    a finished write either. Such a write was never fsynced, so never acknowledged.

    Raises:
        TornLog: anything else wrong, as `parse_log` says.
    """
    end = data.rfind(b"\n") + 1
    if end == len(data) or end == 0:
        return parse_log(data, path), len(data)
    records = parse_log(data[:end], path)
    if isinstance(records[-1], AssistantRecord):
        records.pop()
        end = data.rfind(b"\n", 0, end - 1) + 1
    return records, end


def parse_log(data: bytes, path: Path) -> list[LogRecord]:
    """The records of a log file's bytes; the first is always `session_start`.

    Raises:
        TornLog: naming `path`, the line number and what is wrong with that line.
    """
    if not data:
        raise TornLog(path, 1, "the log is empty; its first line must be session_start")
    records: list[LogRecord] = []
    # One line at a time (not `split`), so a long log is not held twice while it is read.
    for number, line in enumerate(io.BytesIO(data), start=1):
        if not line.endswith(b"\n"):
            raise TornLog(path, number, "the last line has no newline (a torn write)")
        try:
            record = load_record(line[:-1])
        except DecodeError as exc:
            raise TornLog(path, number, f"not a log record: {exc}") from None
        if (number == 1) != isinstance(record, SessionStartRecord):
            where = "the first line must be" if number == 1 else "only the first line may be"
            raise TornLog(path, number, f"{where} session_start")
        records.append(record)
    return records
