"""Hypothesis strategies for every protocol value, shared by the tests."""

from __future__ import annotations

import string
from datetime import UTC, datetime
from typing import Any

import attrs
from hypothesis import strategies as st

from boxmaker import proto as p

ID_ALPHABET = string.ascii_letters + string.digits + "._-"

session_ids = st.text(ID_ALPHABET, min_size=1, max_size=128).filter(lambda s: s[0] not in ".-")
timestamps = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
).map(p.Timestamp)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
sha256s = st.text("0123456789abcdef", min_size=64, max_size=64)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | finite_floats | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

# Fields with a default are given strategies by hand below: `st.builds` leaves them at their
# default otherwise. Hypothesis infers attrs fields from their types, which are strings under
# `from __future__ import annotations` until resolved.
for _name in p.__all__:
    _cls = getattr(p, _name)
    if attrs.has(_cls):
        attrs.resolve_types(_cls)

st.register_type_strategy(p.SessionId, session_ids.map(p.SessionId))
st.register_type_strategy(p.Timestamp, timestamps)

tool_calls = st.builds(p.ToolCall)
tool_call_lists = st.lists(tool_calls, max_size=3).map(tuple)
tool_schemas = st.builds(
    p.ToolSchema, parameters=st.dictionaries(st.text(max_size=8), json_values, max_size=4)
)
timings = st.builds(p.Timings, prompt_ms=finite_floats, predicted_ms=finite_floats)

records = {
    p.SessionStartRecord: st.builds(p.SessionStartRecord, baseline=sha256s),
    p.UserRecord: st.builds(p.UserRecord),
    p.AssistantRecord: st.builds(p.AssistantRecord, tool_calls=st.none() | tool_call_lists),
    p.UsageRecord: st.builds(p.UsageRecord, stopped=st.none() | st.just("repetition")),
    p.ToolResultRecord: st.builds(p.ToolResultRecord),
    p.CacheLossRecord: st.builds(
        p.CacheLossRecord,
        cause=st.none() | st.sampled_from(p.LossCause),
        detail=st.none() | st.text(),
    ),
    p.TurnEndRecord: st.builds(p.TurnEndRecord),
    p.EpochEndRecord: st.builds(p.EpochEndRecord, summary=st.none() | st.text()),
    p.EpochStartRecord: st.builds(p.EpochStartRecord),
    p.SummaryRecord: st.builds(p.SummaryRecord),
    p.WrapUpRecord: st.builds(p.WrapUpRecord, reason=st.none() | st.sampled_from(p.WrapUpReason)),
    p.BreakRecord: st.builds(p.BreakRecord),
    p.CallSentRecord: st.builds(p.CallSentRecord),
    p.ApprovalRecord: st.builds(p.ApprovalRecord),
}
events = {
    cls: st.builds(cls)
    for cls in (
        p.Queued,
        p.Waiting,
        p.Progress,
        p.Reasoning,
        p.Content,
        p.ToolCallDelta,
        p.ThinkingCapped,
        p.Retrying,
        p.ToolCallStarted,
        p.ToolResult,
        p.CacheLoss,
        p.EpochStart,
        p.Length,
        p.ToolsOff,
        p.Repetition,
        p.QueuedMessage,
        p.MessageTaken,
        p.ApprovalNeeded,
        p.ApprovalAnswered,
    )
}
turn_events = st.one_of([s for cls, s in events.items() if cls is not p.ToolCallDelta])
messages = {
    p.SystemMessage: st.builds(p.SystemMessage),
    p.UserMessage: st.builds(p.UserMessage),
    p.AssistantMessage: st.builds(
        p.AssistantMessage,
        reasoning_content=st.none() | st.text(),
        tool_calls=st.none() | tool_call_lists,
    ),
    p.ToolMessage: st.builds(p.ToolMessage),
}
tool_responses = {
    cls: st.builds(cls)
    for cls in (p.ResultResponse, p.FailedResponse, p.DeniedResponse, p.PendingApprovalResponse)
}
frames = {
    p.TurnFrame: st.one_of(
        st.builds(
            p.TurnFrame,
            thinking=st.booleans(),
            queue=st.booleans(),
            new_epoch=st.booleans(),
            can_ask=st.booleans(),
        ),
        st.builds(p.TurnFrame, thinking=st.booleans(), break_=st.sampled_from(p.Break)),
    ),
    p.TurnEventFrame: st.builds(p.TurnEventFrame, event=turn_events),
    p.TurnDoneFrame: st.builds(p.TurnDoneFrame),
    p.WireError: st.builds(p.WireError),
    p.ApprovalFrame: st.builds(p.ApprovalFrame),
    p.ApprovalDoneFrame: st.builds(p.ApprovalDoneFrame),
    p.ListApprovalsFrame: st.builds(p.ListApprovalsFrame),
    p.WaitingFrame: st.builds(
        p.WaitingFrame,
        waiting=st.lists(st.builds(p.WaitingApproval, waited_s=finite_floats), max_size=2).map(
            tuple
        ),
    ),
}
tool_requests = st.builds(p.ToolRequest, definition=st.none() | sha256s)
broker_frames = {
    p.ListToolsFrame: st.builds(p.ListToolsFrame),
    p.ToolsFrame: st.builds(
        p.ToolsFrame,
        tools=st.lists(st.builds(p.ListedTool, schema=tool_schemas), max_size=2).map(tuple),
        roots=st.lists(st.builds(p.ListedRoot), max_size=2).map(tuple),
    ),
    p.CallFrame: st.builds(p.CallFrame, request=tool_requests),
    p.ApproveFrame: st.builds(p.ApproveFrame),
    p.ResponseFrame: st.builds(p.ResponseFrame, response=st.one_of(list(tool_responses.values()))),
}
others = {
    p.ToolCall: tool_calls,
    p.ToolSchema: tool_schemas,
    p.Timings: timings,
    p.Usage: st.builds(p.Usage),
    p.ToolRequest: tool_requests,
    p.Completion: st.builds(p.Completion, tool_calls=st.none() | tool_call_lists, timings=timings),
    p.ChatRequest: st.builds(
        p.ChatRequest,
        messages=st.lists(st.one_of(list(messages.values())), max_size=4).map(tuple),
        tools=st.lists(tool_schemas, max_size=2).map(tuple),
        thinking=st.booleans(),
        max_tokens=st.none() | st.integers(1, 4096),
    ),
}

# Every concrete type, and every union with the members it holds.
ALL_TYPES: dict[Any, st.SearchStrategy[Any]] = {
    **records,
    **events,
    **messages,
    **tool_responses,
    **frames,
    **broker_frames,
    **others,
}
UNIONS: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "LogRecord": (p.LogRecord, st.one_of(list(records.values()))),
    "ChatEvent": (
        p.ChatEvent,
        st.one_of([s for cls, s in events.items() if cls in p.ChatEvent.__args__]),
    ),
    "TurnEvent": (p.TurnEvent, turn_events),
    "ChatMessage": (p.ChatMessage, st.one_of(list(messages.values()))),
    "ToolResponse": (p.ToolResponse, st.one_of(list(tool_responses.values()))),
    "Frame": (p.Frame, st.one_of(list(frames.values()))),
    "BrokerFrame": (p.BrokerFrame, st.one_of(list(broker_frames.values()))),
}
