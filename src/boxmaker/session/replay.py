"""Replay: the log's records turned into the messages of the next request, and the state a
session derives from its log. Pure.

The one rule for sending an assistant record back, fixed forever because the bytes of old
requests must never change: `content` is `""` when the record holds null, and
`reasoning_content` and `tool_calls` are left out when null (the converter omits them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..proto import (
    AssistantMessage,
    AssistantRecord,
    Baseline,
    BreakRecord,
    ChatMessage,
    DataClass,
    EpochStartRecord,
    LogRecord,
    Outcome,
    SummaryRecord,
    SystemMessage,
    Timestamp,
    ToolCall,
    ToolMessage,
    ToolResultRecord,
    TurnEndRecord,
    UsageRecord,
    UserMessage,
    UserRecord,
    WrapUpRecord,
)

__all__ = [
    "INTERRUPTED",
    "dangling_calls",
    "healing_records",
    "last_usage",
    "messages",
    "messages_of",
    "next_call",
    "request_messages",
    "starts_turn",
    "turn_end",
    "unended_turn",
]

INTERRUPTED = "This call was interrupted before it ran; it was not run. Call it again if needed."


def messages_of(record: LogRecord) -> tuple[ChatMessage, ...]:
    """The messages a record gives: none, one, or two (an epoch's summary is a user message
    and the assistant's acknowledgement)."""
    match record:
        case UserRecord(content=content) | WrapUpRecord(content=content):
            return (UserMessage(content=content),)
        case AssistantRecord(content=content, reasoning_content=reasoning, tool_calls=calls):
            message = AssistantMessage(
                content="" if content is None else content,
                reasoning_content=reasoning,
                tool_calls=calls,
            )
            return (message,)
        case ToolResultRecord(tool_call_id=call_id, content=content):
            return (ToolMessage(tool_call_id=call_id, content=content),)
        case SummaryRecord(content=content, reply=reply):
            return (UserMessage(content=content), AssistantMessage(content=reply))
    return ()


def messages(baseline: Baseline, records: Iterable[LogRecord]) -> list[ChatMessage]:
    """The messages the log gives, in order (the system message is not among them)."""
    return [m for record in records for m in messages_of(record)]


def request_messages(baseline: Baseline, records: Iterable[LogRecord]) -> tuple[ChatMessage, ...]:
    """The message array of the next request: the baseline's system text, then `messages`."""
    return (SystemMessage(content=baseline.system), *messages(baseline, records))


def next_call(records: Iterable[LogRecord]) -> int:
    """One more than the highest `tool_result.call` in the log (or the highest of the epochs
    before, which its `epoch_start` holds); 1 for the first call."""
    highest = 0
    for record in records:  # one pass, nothing made per record: resume reads 10⁵ of them
        kind = type(record)
        if kind is ToolResultRecord:
            highest = max(highest, record.call)  # type: ignore[union-attr]
        elif kind is EpochStartRecord:
            highest = max(highest, record.calls)  # type: ignore[union-attr]
    return highest + 1


def last_usage(records: Sequence[LogRecord]) -> UsageRecord | None:
    for record in reversed(records):
        if isinstance(record, UsageRecord):
            return record
    return None


def dangling_calls(records: Sequence[LogRecord]) -> list[ToolCall]:
    """The tool calls of the log's last assistant record that have no `tool_result`.

    Only when nothing but usage, cache-loss and tool-result records follow that assistant
    record: a later user message, `wrap_up` or `turn_end` means its calls were closed.
    """
    answered: set[str] = set()
    for record in reversed(records):
        if isinstance(record, ToolResultRecord):
            answered.add(record.tool_call_id)
        elif isinstance(record, AssistantRecord):
            return [c for c in record.tool_calls or () if c.id not in answered]
        elif isinstance(record, UserRecord | TurnEndRecord | WrapUpRecord):
            return []
    return []


def healing_records(
    records: Sequence[LogRecord], time: Timestamp, first_call: int, content: str = INTERRUPTED
) -> list[ToolResultRecord]:
    """One `tool_result` saying "interrupted, not run" (or `content`) for each dangling call,
    in order."""
    return [
        ToolResultRecord(
            time=time,
            call=first_call + offset,
            tool_call_id=call.id,
            content=content,
            data_class=DataClass.PUBLIC,
            untrusted=False,
            truncated=False,
        )
        for offset, call in enumerate(dangling_calls(records))
    ]


def starts_turn(records: Sequence[LogRecord], index: int) -> bool:
    """Whether the `user` record at `index` starts a turn: each does but a soft break's, which
    goes on with the turn it broke into (issue 19)."""
    before = records[index - 1] if index else None
    return not (isinstance(before, BreakRecord) and not before.hard)


def unended_turn(records: Sequence[LogRecord], chained_from: int) -> Sequence[LogRecord]:
    """The records of the log's last turn when it has no `turn_end` (loopd stopped in the
    middle of it), else nothing. A turn written before the chain (before `chained_from`) is
    not judged: `turn_end` did not exist then."""
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        if isinstance(record, TurnEndRecord):
            return ()
        if isinstance(record, UserRecord) and starts_turn(records, index):
            return records[index:] if index >= chained_from else ()
    return ()


def turn_end(
    turn: Sequence[LogRecord], time: Timestamp, outcome: Outcome, ms: int
) -> TurnEndRecord:
    """The `turn_end` of a turn's records: its completions, tool results and token sums."""
    usages = [r for r in turn if isinstance(r, UsageRecord)]
    return TurnEndRecord(
        time=time,
        outcome=outcome,
        completions=sum(isinstance(r, AssistantRecord) for r in turn),
        tool_calls=sum(isinstance(r, ToolResultRecord) for r in turn),
        prompt_n=sum(u.prompt_n for u in usages),
        cache_n=sum(u.cache_n for u in usages),
        predicted_n=sum(u.predicted_n for u in usages),
        ms=ms,
    )
