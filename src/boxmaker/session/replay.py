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
    ChatMessage,
    DataClass,
    LogRecord,
    SystemMessage,
    Timestamp,
    ToolCall,
    ToolMessage,
    ToolResultRecord,
    UsageRecord,
    UserMessage,
    UserRecord,
)

__all__ = [
    "INTERRUPTED",
    "dangling_calls",
    "healing_records",
    "last_usage",
    "message_of",
    "messages",
    "next_call",
    "request_messages",
]

INTERRUPTED = "This call was interrupted before it ran; it was not run. Call it again if needed."


def message_of(record: LogRecord) -> ChatMessage | None:
    """The message a record gives, or None for records that give none."""
    match record:
        case UserRecord(content=content):
            return UserMessage(content=content)
        case AssistantRecord(content=content, reasoning_content=reasoning, tool_calls=calls):
            return AssistantMessage(
                content="" if content is None else content,
                reasoning_content=reasoning,
                tool_calls=calls,
            )
        case ToolResultRecord(tool_call_id=call_id, content=content):
            return ToolMessage(tool_call_id=call_id, content=content)
    return None


def messages(baseline: Baseline, records: Iterable[LogRecord]) -> list[ChatMessage]:
    """The messages the log gives, in order (the system message is not among them)."""
    return [m for record in records if (m := message_of(record)) is not None]


def request_messages(baseline: Baseline, records: Iterable[LogRecord]) -> tuple[ChatMessage, ...]:
    """The message array of the next request: the baseline's system text, then `messages`."""
    return (SystemMessage(content=baseline.system), *messages(baseline, records))


def next_call(records: Iterable[LogRecord]) -> int:
    """One more than the highest `tool_result.call` in the log; 1 for the first call."""
    return 1 + max((r.call for r in records if isinstance(r, ToolResultRecord)), default=0)


def last_usage(records: Sequence[LogRecord]) -> UsageRecord | None:
    for record in reversed(records):
        if isinstance(record, UsageRecord):
            return record
    return None


def dangling_calls(records: Sequence[LogRecord]) -> list[ToolCall]:
    """The tool calls of the log's last assistant record that have no `tool_result`.

    Only when nothing but usage, cache-loss and tool-result records follow that assistant
    record: a later user message means the calls were answered in an earlier turn.
    """
    answered: set[str] = set()
    for record in reversed(records):
        if isinstance(record, ToolResultRecord):
            answered.add(record.tool_call_id)
        elif isinstance(record, AssistantRecord):
            return [c for c in record.tool_calls or () if c.id not in answered]
        elif isinstance(record, UserRecord):
            return []
    return []


def healing_records(
    records: Sequence[LogRecord], time: Timestamp, first_call: int
) -> list[ToolResultRecord]:
    """One `tool_result` saying "interrupted, not run" for each dangling call, in order."""
    return [
        ToolResultRecord(
            time=time,
            call=first_call + offset,
            tool_call_id=call.id,
            content=INTERRUPTED,
            data_class=DataClass.PUBLIC,
            untrusted=False,
            truncated=False,
        )
        for offset, call in enumerate(dangling_calls(records))
    ]
