"""Reading a session log: every line a complete, known record, or an error naming the line.

A last line without its newline is a torn write; a line that is not JSON, not a known record
or not the shape of one is refused the same way, wherever it is. Nothing is repaired: the
error names the file and the line, and the file is left as it is. Pure.
"""

from __future__ import annotations

import io
from pathlib import Path

from ..proto import DecodeError, LogRecord, SessionStartRecord, load_record
from .errors import TornLog

__all__ = ["parse_log"]


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
