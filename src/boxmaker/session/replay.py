"""Replay: the log's records turned into the messages of the next request, and the state a
session derives from its log. Pure.

The one rule for sending an assistant record back, fixed forever because the bytes of old
requests must never change: `content` is `""` when the record holds null, and
`reasoning_content` and `tool_calls` are left out when null (the converter omits them).

A fenced session (its baseline has `fenced`) differs in three places, all fixed by its
baseline: every request carries the baseline's example exchanges after the system message;
no `tools` array is sent; and a tool result goes back as the baseline says (a user message
`prefix + content + suffix`, or a tool message). Its calls are the tool blocks of the
assistant's text (`tools/fenced.py`), which is sent back exactly as the server returned it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..proto import (
    AssistantMessage,
    AssistantRecord,
    Baseline,
    BreakRecord,
    CallSentRecord,
    ChatMessage,
    DataClass,
    EpochStartRecord,
    Fenced,
    ImagePart,
    LogRecord,
    Outcome,
    RecallRecord,
    SummaryRecord,
    SystemMessage,
    Timestamp,
    ToolCall,
    ToolMessage,
    ToolResultRecord,
    ToolSchema,
    TurnEndRecord,
    UsageRecord,
    UserMessage,
    UserRecord,
    WrapUpRecord,
    encode,
)
from ..tools import block_text, parse_blocks

__all__ = [
    "INTERRUPTED",
    "UNKNOWN_OUTCOME",
    "calls_of",
    "dangling_calls",
    "healing_records",
    "messages",
    "messages_of",
    "next_call",
    "recall_messages",
    "request_messages",
    "request_tools",
    "result_message",
    "starts_turn",
    "turn_end",
    "turn_starts",
    "unended_turn",
]

INTERRUPTED = "This call was interrupted before it ran; it was not run. Call it again if needed."
UNKNOWN_OUTCOME = (
    "This call was sent to the tool, and then loopd or brokerd stopped: whether it ran, and "
    "what it did, is not known. It was not run again. Check its effect before calling it "
    "again."
)


def result_message(fenced: Fenced, call_id: str, content: str) -> ChatMessage:
    """A tool result as a fenced session sends it back."""
    if fenced.results == "tool":
        return ToolMessage(tool_call_id=call_id, content=content)
    return UserMessage(content=fenced.prefix + content + fenced.suffix)


def messages_of(record: LogRecord, fenced: Fenced | None = None) -> tuple[ChatMessage, ...]:
    """The messages a record gives: none, one, or two (an epoch's summary is a user message
    and the assistant's acknowledgement); `fenced`: the session's baseline's, for how a tool
    result goes back."""
    # By exact type, most frequent first: resume asks this of every record (10⁵ of them).
    if type(record) is AssistantRecord:
        content = record.content
        message = AssistantMessage(
            content="" if content is None else content,
            reasoning_content=record.reasoning_content,
            tool_calls=record.tool_calls,
        )
        return (message,)
    if type(record) is UserRecord:
        if record.files:
            return (user_message(record),)
        note = record.note
        return (UserMessage(content=f"{record.content}\n\n{note}" if note else record.content),)
    if type(record) is WrapUpRecord:
        return (UserMessage(content=record.content),)
    if type(record) is ToolResultRecord:
        if fenced is not None:
            return (result_message(fenced, record.tool_call_id, record.content),)
        return (ToolMessage(tool_call_id=record.tool_call_id, content=record.content),)
    if type(record) is SummaryRecord:
        return (UserMessage(content=record.content), AssistantMessage(content=record.reply))
    if type(record) is RecallRecord:
        return recall_messages(record, fenced)
    return ()


def user_message(record: UserRecord) -> UserMessage:
    """A message that carried files: the owner's words, the files' text, loopd's note, then
    each image sent as one (named by its hash: the request fills in its bytes)."""
    text = "\n\n".join(part for part in (record.content, record.attached, record.note) if part)
    images = tuple(
        ImagePart(file.media_type, file.sha256)
        for file in record.files
        if file.media_type.startswith("image/") and file.text is None
    )
    return UserMessage(content=text, images=images)


RECALL = "recall"  # the tool an auto-recall is replayed as a call of


def recall_messages(
    record: RecallRecord, fenced: Fenced | None = None
) -> tuple[ChatMessage, ChatMessage]:
    """An auto-recall as the model sees it: a `recall` call with its query (`recall-<call>`),
    as the session's tools travel, then its result, as any tool result goes back."""
    call_id = f"recall-{record.call}"
    if fenced is not None:
        asked = AssistantMessage(content=block_text(RECALL, {"query": record.query}))
        return asked, result_message(fenced, call_id, record.content)
    arguments = encode({"query": record.query}).decode()
    asked = AssistantMessage(content="", tool_calls=(ToolCall(call_id, RECALL, arguments),))
    return asked, ToolMessage(tool_call_id=call_id, content=record.content)


def messages(baseline: Baseline, records: Iterable[LogRecord]) -> list[ChatMessage]:
    """The messages the log gives, in order (the system message is not among them)."""
    fenced = baseline.fenced
    return [m for record in records for m in messages_of(record, fenced)]


def request_messages(baseline: Baseline, records: Iterable[LogRecord]) -> tuple[ChatMessage, ...]:
    """The message array of the next request: the baseline's system text (and a fenced
    session's example exchanges), then `messages`."""
    examples = baseline.fenced.examples if baseline.fenced is not None else ()
    return (SystemMessage(content=baseline.system), *examples, *messages(baseline, records))


def request_tools(baseline: Baseline) -> tuple[ToolSchema, ...]:
    """The `tools` of every request: the baseline's, or none in a fenced session."""
    return () if baseline.fenced is not None else baseline.tools


def calls_of(record: AssistantRecord, baseline: Baseline | None = None) -> tuple[ToolCall, ...]:
    """The tool calls of an assistant record: its `tool_calls`, or in a fenced session the
    tool blocks of its text."""
    if baseline is not None and baseline.fenced is not None:
        return tuple(parse_blocks(record.content, [tool.name for tool in baseline.tools]))
    return record.tool_calls or ()


def next_call(records: Iterable[LogRecord]) -> int:
    """One more than the highest call number in the log, a `tool_result`'s or an auto-recall's
    (or the highest of the epochs before, which its `epoch_start` holds); 1 for the first."""
    highest = 0
    for record in records:  # one pass, nothing made per record: resume reads 10⁵ of them
        kind = type(record)
        if kind is ToolResultRecord or kind is RecallRecord:
            highest = max(highest, record.call)  # type: ignore[union-attr]
        elif kind is EpochStartRecord:
            highest = max(highest, record.calls)  # type: ignore[union-attr]
    return highest + 1


def dangling_calls(
    records: Sequence[LogRecord], baseline: Baseline | None = None
) -> list[ToolCall]:
    """The tool calls of the log's last assistant record that have no `tool_result`.

    Only when nothing but usage, cache-loss and tool-result records follow that assistant
    record: a later user message, `wrap_up` or `turn_end` means its calls were closed.
    """
    answered: set[str] = set()
    for record in reversed(records):
        if isinstance(record, ToolResultRecord):
            answered.add(record.tool_call_id)
        elif isinstance(record, AssistantRecord):
            return [c for c in calls_of(record, baseline) if c.id not in answered]
        elif isinstance(record, UserRecord | TurnEndRecord | WrapUpRecord):
            return []
    return []


def healing_records(
    records: Sequence[LogRecord],
    time: Timestamp,
    first_call: int,
    baseline: Baseline | None = None,
    content: str = INTERRUPTED,
) -> list[ToolResultRecord]:
    """One `tool_result` saying "interrupted, not run" (or `content`) for each dangling call,
    in order; a call that was sent to brokerd (its `call_sent` record) says instead that its
    outcome is unknown."""
    sent: set[str] = set()
    for record in reversed(records):  # only what follows the last completion
        if isinstance(record, AssistantRecord):
            break
        if isinstance(record, CallSentRecord):
            sent.add(record.tool_call_id)
    return [
        ToolResultRecord(
            time=time,
            call=first_call + offset,
            tool_call_id=call.id,
            content=UNKNOWN_OUTCOME if call.id in sent else content,
            data_class=DataClass.PUBLIC,
            untrusted=False,
            truncated=False,
        )
        for offset, call in enumerate(dangling_calls(records, baseline))
    ]


def starts_turn(records: Sequence[LogRecord], index: int) -> bool:
    """Whether the `user` record at `index` starts a turn: each does but a soft break's, which
    goes on with the turn it broke into."""
    before = records[index - 1] if index else None
    return not (isinstance(before, BreakRecord) and not before.hard)


def turn_starts(records: Sequence[LogRecord], own_from: int) -> list[int]:
    """Where the turns of an epoch's log begin (their `user` records), from its first own
    record `own_from` on (the turns it carries are an earlier epoch's)."""
    return [
        index
        for index in range(own_from, len(records))
        if isinstance(records[index], UserRecord) and starts_turn(records, index)
    ]


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
