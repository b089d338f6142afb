"""`bxctl verify`: is a log whole? Its lines (each a known record, the hash chain unbroken, as
`parse_log` checks), the order of its records, and its end against `index.json`. Pure.

The first problem found is reported with the file and the line. A chain cannot tell that
lines were cut off the end of a log; `index.json`, written after each turn's end, names the
last `turn_end` line and how many turns were answered, so a log that lost its end says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from ..proto import (
    AssistantRecord,
    Baseline,
    BreakRecord,
    EpochEndRecord,
    EpochStartRecord,
    LogRecord,
    Outcome,
    RecallRecord,
    SessionStartRecord,
    SummaryRecord,
    ToolResultRecord,
    TurnEndRecord,
    UsageRecord,
    UserRecord,
    WrapUpRecord,
    unstructure,
)
from .errors import TornLog
from .index import Index
from .log import Log, header, parse_log
from .replay import calls_of, starts_turn, turn_end

__all__ = ["Problem", "check_log"]

_HARD = (Outcome.BREAK_HARD, Outcome.STOPPED)  # the outcomes a hard break closes with


@frozen
class Problem:
    """What is wrong with a log, at which line (0 when it is the log as a whole)."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {self.reason}"


def check_log(
    data: bytes,
    path: Path,
    genesis: str,
    index: Index | None,
    *,
    epoch: int = 0,
    baseline: Baseline | None = None,
) -> Problem | Log:
    """The first problem of the log of epoch `epoch`, or the log when it has none. `index`
    is compared with its end when it names this epoch. With the session's `baseline`, a
    fenced session's tool blocks are its tool calls."""
    try:
        log = parse_log(data, path, genesis)
    except TornLog as error:
        return Problem(path, error.line, error.reason)
    problem = _epoch(log.records, epoch) or _order(log.records, log.chained_from, baseline)
    if problem is not None:
        return Problem(path, *problem)
    if index is not None and (reason := _end(data, log, index)) is not None:
        return Problem(path, 0, reason)
    return log


def _epoch(records: Sequence[LogRecord], epoch: int) -> tuple[int, str] | None:
    """The first record out of its place in an epoch's layout (`epoch.py`), as (line, reason)."""
    start = records[0]
    assert isinstance(start, SessionStartRecord)
    if start.epoch != epoch:
        return 1, f"session_start says epoch {start.epoch}, in the log of epoch {epoch}"
    opened = len(records) > 1 and isinstance(records[1], EpochStartRecord)
    if epoch and not opened:
        return 2, f"the log of epoch {epoch} must go on with epoch_start"
    for at, record in enumerate(records):
        if isinstance(record, EpochStartRecord) and (at != 1 or record.epoch != epoch):
            return at + 1, f"an epoch_start for epoch {record.epoch} out of its place"
        if isinstance(record, SummaryRecord) and not (
            opened and (at == 2 or isinstance(records[at - 1], SummaryRecord))
        ):
            return at + 1, "a summary out of its place (right after epoch_start)"
        if isinstance(record, EpochEndRecord) and (at != len(records) - 1 or record.epoch != epoch):
            return at + 1, f"an epoch_end for epoch {record.epoch} that is not the log's last line"
    return None


def _order(
    records: Sequence[LogRecord], chained_from: int, baseline: Baseline | None
) -> tuple[int, str] | None:
    """The first record out of order, as (line, reason)."""
    open_calls: set[str] = set()
    turn_start: int | None = None
    hard: int | None = None  # the line of the turn's hard break: only its closing may follow
    for at, record in enumerate(records):
        line = at + 1
        if hard is not None and not isinstance(record, ToolResultRecord | TurnEndRecord):
            kind = unstructure(record)["type"]
            return line, f"a {kind!r} record after the hard break at line {hard}"
        if isinstance(record, WrapUpRecord | EpochEndRecord) and open_calls:
            kind = "wrap_up" if isinstance(record, WrapUpRecord) else "epoch_end"
            return line, f"a {kind} before the results of the tool calls it follows"
        if isinstance(record, WrapUpRecord) and turn_start is None:
            return line, "a wrap_up outside a turn"
        if isinstance(record, EpochEndRecord) and turn_start is not None:
            return line, f"an epoch_end in the turn at line {turn_start + 1}, which has no turn_end"
        if isinstance(record, BreakRecord):
            if turn_start is None:
                return line, "a break with no turn before it"
            if record.hard:
                hard = line
            elif open_calls:
                return line, "a soft break before every tool call of its step has a result"
            elif at + 1 >= len(records) or not isinstance(records[at + 1], UserRecord):
                return line, "a soft break without its message (a user record) right after it"
        elif isinstance(record, AssistantRecord):
            if at + 1 >= len(records) or not isinstance(records[at + 1], UsageRecord):
                return line, "an assistant record without its usage right after it"
            open_calls = {call.id for call in calls_of(record, baseline)}
        elif isinstance(record, RecallRecord):
            before = records[at - 1] if at else None
            if not (isinstance(before, UserRecord) and starts_turn(records, at - 1)):
                return line, "a recall that does not follow the user message opening its turn"
        elif isinstance(record, ToolResultRecord):
            if record.tool_call_id not in open_calls:
                return line, f"a tool_result for {record.tool_call_id!r}, which no call awaits"
            open_calls.discard(record.tool_call_id)
        elif isinstance(record, UserRecord):
            if not starts_turn(records, at):
                continue  # a soft break's message: the turn goes on
            if turn_start is not None and turn_start >= chained_from:
                return line, f"the turn at line {turn_start + 1} has no turn_end before this one"
            turn_start, open_calls = at, set()
        elif isinstance(record, TurnEndRecord):
            if turn_start is None:
                return line, "a turn_end with no turn before it"
            if (hard is not None) != (record.outcome in _HARD):
                return line, f"a turn_end saying {record.outcome.value} " + (
                    f"after the hard break at line {hard}" if hard else "with no hard break"
                )
            sums = turn_end(records[turn_start:at], record.time, record.outcome, record.ms)
            if sums != record:
                return line, "the turn_end's figures are not the sums of its turn's records"
            turn_start, hard = None, None
    return None


def _end(data: bytes, log: Log, index: Index) -> str | None:
    """Whether the log still holds the end `index.json` names (when it names this epoch)."""
    head = header(log.records)
    if index.epoch > head.epoch:
        return f"index.json names epoch {index.epoch}, but the newest log is of epoch {head.epoch}"
    if index.epoch < head.epoch:
        return None  # written before this epoch opened (loopd stopped in between): behind
    lines = len(log.records)
    if index.seq > lines:
        return (
            f"the log ends at line {lines}, but index.json names line {index.seq} as the last "
            "turn's end: lines were cut off the end"
        )
    if index.seq and _hash_of_line(data, index.seq) != index.hash:
        return f"line {index.seq} is not the turn_end index.json names (its hash differs)"
    opened = head.start
    done = opened.done if opened else 0
    done += sum(isinstance(r, TurnEndRecord) and r.outcome is Outcome.DONE for r in log.records)
    if done < index.done:
        return f"the log holds {done} answered turns; index.json counted {index.done}"
    return None


def _hash_of_line(data: bytes, number: int) -> str:
    start = 0
    for _ in range(number - 1):
        start = data.index(b"\n", start) + 1
    end = data.index(b"\n", start)
    return data[end - 66 : end - 2].decode(errors="replace")  # `"hash":"<64>"}` ends a line
