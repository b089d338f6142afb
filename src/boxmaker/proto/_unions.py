"""The tagged unions and frames, and their hooks (`register_unions`, called once by
`_converter.py` for the one converter).

A tagged class is written with its tag first (`"type"` for records, events and tool
responses, `"role"` for chat messages), and a union alias such as `LogRecord` is read by its
tag, accepting only the members it names. A frame wraps its body as `{"kind", "final",
"body"}` with `kind` and `final` derived from the class, so a frame can never claim the wrong
kind or finality. A `ToolCall` travels nested, as the server writes it. Pure.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import attrs
import cattrs
from cattrs.errors import ClassValidationError

from ._attach import AttachedFrame, AttachFrame, FilePieceFrame
from ._broker_frames import (
    ApproveFrame,
    BrokerFrame,
    CallFrame,
    ListToolsFrame,
    NotedFrame,
    RecallFrame,
    ResponseFrame,
    SessionChangedFrame,
    SessionRemovedFrame,
    ToolsFrame,
)
from ._chat import AssistantMessage, ChatMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from ._events import (
    ApprovalAnswered,
    ApprovalNeeded,
    CacheCold,
    CacheLoss,
    ChatEvent,
    Content,
    EpochStart,
    Length,
    MessageTaken,
    Progress,
    Queued,
    QueuedMessage,
    Reasoning,
    Repetition,
    Retrying,
    ThinkingCapped,
    ToolCallDelta,
    ToolCallStarted,
    ToolResult,
    ToolsOff,
    TurnEvent,
    Waiting,
)
from ._frames import (
    ApprovalDoneFrame,
    ApprovalFrame,
    DuplicateFrame,
    Frame,
    ListApprovalsFrame,
    StopFrame,
    StoppedFrame,
    TurnDoneFrame,
    TurnDonePartFrame,
    TurnEventFrame,
    TurnFrame,
    WaitingFrame,
    Watched,
    WatchEventFrame,
    WatchFrame,
    WatchingFrame,
    WireError,
)
from ._ids import InvalidValue
from ._notes import ForgetRecord, NoteRecord, NotesRecord
from ._objects import fail, is_union, noted, object_structure, object_unstructure
from ._records import (
    ApprovalRecord,
    AssistantRecord,
    BreakRecord,
    CacheLossRecord,
    CallSentRecord,
    EpochEndRecord,
    EpochStartRecord,
    LogRecord,
    RecallRecord,
    SessionStartRecord,
    SummaryRecord,
    ToolResultRecord,
    TurnEndRecord,
    UsageRecord,
    UserRecord,
    WrapUpRecord,
)
from ._schedules import (
    CancelRecord,
    FiredRecord,
    PauseRecord,
    ResumeRecord,
    ScheduleRecord,
    SchedulesRecord,
)
from ._tools import (
    DeniedResponse,
    FailedResponse,
    PendingApprovalResponse,
    ResultResponse,
    ToolResponse,
)
from ._undo import (
    ModeFrame,
    ModeRecord,
    ModeSetFrame,
    UndoFrame,
    UndoneFrame,
    UndoPreviewFrame,
    UndoRecord,
)

__all__ = [
    "EVENT_TAGS",
    "FRAME_KINDS",
    "MESSAGE_ROLES",
    "NOTE_TAGS",
    "RECORD_TAGS",
    "RESPONSE_TAGS",
    "SCHEDULE_TAGS",
    "frame_is_final",
    "frame_kind",
    "register_unions",
    "tool_call_unstructure",
]


RECORD_TAGS: dict[type, str] = {
    SessionStartRecord: "session_start",
    UserRecord: "user",
    AssistantRecord: "assistant",
    UsageRecord: "usage",
    ToolResultRecord: "tool_result",
    CacheLossRecord: "cache_loss",
    TurnEndRecord: "turn_end",
    EpochEndRecord: "epoch_end",
    EpochStartRecord: "epoch_start",
    SummaryRecord: "summary",
    WrapUpRecord: "wrap_up",
    BreakRecord: "break",
    CallSentRecord: "call_sent",
    ApprovalRecord: "approval",
    RecallRecord: "recall",
    ModeRecord: "mode",
    UndoRecord: "undo",
}
NOTE_TAGS: dict[type, str] = {NoteRecord: "note", ForgetRecord: "forget"}
SCHEDULE_TAGS: dict[type, str] = {
    ScheduleRecord: "schedule",
    CancelRecord: "cancel",
    PauseRecord: "pause",
    ResumeRecord: "resume",
    FiredRecord: "fired",
}
EVENT_TAGS: dict[type, str] = {
    Queued: "queued",
    Waiting: "waiting",
    Progress: "progress",
    Reasoning: "reasoning",
    Content: "content",
    ToolCallDelta: "tool_call_delta",
    ThinkingCapped: "thinking_capped",
    Retrying: "retrying",
    ToolCallStarted: "tool_call_started",
    ToolResult: "tool_result",
    CacheCold: "cache_cold",
    CacheLoss: "cache_loss",
    EpochStart: "epoch_start",
    Length: "length",
    ToolsOff: "tools_off",
    Repetition: "repetition",
    QueuedMessage: "queued_message",
    MessageTaken: "message_taken",
    ApprovalNeeded: "approval_needed",
    ApprovalAnswered: "approval_answered",
}
RESPONSE_TAGS: dict[type, str] = {
    ResultResponse: "result",
    FailedResponse: "failed",
    DeniedResponse: "denied",
    PendingApprovalResponse: "pending_approval",
}
MESSAGE_ROLES: dict[type, str] = {
    SystemMessage: "system",
    UserMessage: "user",
    AssistantMessage: "assistant",
    ToolMessage: "tool",
}
FRAME_KINDS: dict[type, tuple[str, bool]] = {
    TurnFrame: ("turn", False),
    TurnEventFrame: ("turn_event", False),
    TurnDoneFrame: ("turn_done", True),
    TurnDonePartFrame: ("turn_done_part", False),
    WireError: ("error", True),
    ApprovalFrame: ("approval", False),
    ApprovalDoneFrame: ("approval_done", True),
    ListApprovalsFrame: ("list_approvals", False),
    WaitingFrame: ("waiting", True),
    DuplicateFrame: ("duplicate", True),
    StopFrame: ("stop", False),
    StoppedFrame: ("stopped", True),
    WatchFrame: ("watch", False),
    WatchingFrame: ("watching", False),
    WatchEventFrame: ("watch_event", False),
    ListToolsFrame: ("list_tools", False),
    ToolsFrame: ("tools", True),
    CallFrame: ("call", False),
    ApproveFrame: ("approve", False),
    ResponseFrame: ("response", True),
    RecallFrame: ("recall", False),
    SessionChangedFrame: ("session_changed", False),
    SessionRemovedFrame: ("session_removed", False),
    NotedFrame: ("noted", True),
    ModeFrame: ("mode", False),
    ModeSetFrame: ("mode_set", True),
    UndoFrame: ("undo", False),
    UndoPreviewFrame: ("undo_preview", True),
    UndoneFrame: ("undone", True),
    AttachFrame: ("attach", False),
    FilePieceFrame: ("file_piece", False),
    AttachedFrame: ("attached", True),
}


def _register_tagged(converter: cattrs.Converter, key: str, tags: dict[type, str]) -> None:
    """Each class is written with its tag first; the union of all of them is read by tag."""
    for cls, name in tags.items():
        converter.register_structure_hook(cls, object_structure(converter, cls, (key, name)))
        converter.register_unstructure_hook(cls, object_unstructure(converter, cls, (key, name)))


def _union_structure(
    converter: cattrs.Converter, key: str, members: dict[str, type]
) -> Callable[[Any, Any], Any]:
    def hook(value: Any, tp: Any) -> Any:
        if type(value) is not dict:
            raise InvalidValue("expected an object")
        name = value.get(key)
        cls = members.get(name) if type(name) is str else None
        if cls is None:
            problem = "missing field" if name is None else f"unknown {key} {name!r}"
            raise fail(tp, {key: problem})
        return converter.structure(value, cls)

    return hook


def _register_union(
    converter: cattrs.Converter, key: str, tags: dict[type, str], union: Any
) -> None:
    """Read `union` (a `X | Y` alias) by its tag: only the members it names are accepted."""
    members = frozenset(typing.get_args(union))
    by_tag = {name: cls for cls, name in tags.items() if cls in members}
    converter.register_structure_hook_func(
        lambda tp: is_union(tp) and frozenset(typing.get_args(tp)) == members,
        _union_structure(converter, key, by_tag),
    )


# ToolCall's wire shape is nested: {"id", "type": "function", "function": {"name", "arguments"}}.


@attrs.frozen
class _WireFunction:
    name: str
    arguments: str


@attrs.frozen
class _WireToolCall:
    id: str
    type: str
    function: _WireFunction


def _tool_call_hook(converter: cattrs.Converter) -> Callable[[Any, Any], ToolCall]:
    def structure(value: Any, _tp: Any) -> ToolCall:
        wire = converter.structure(value, _WireToolCall)
        if wire.type != "function":
            raise fail(ToolCall, {"type": "expected 'function'"})
        return ToolCall(id=wire.id, name=wire.function.name, arguments=wire.function.arguments)

    return structure


def tool_call_unstructure(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


# Frames: {"kind": K, "final": F, "body": {...}}, K and F fixed by the body's class.

_FRAME_KEYS = frozenset(("kind", "final", "body"))


def frame_kind(frame: object) -> str:
    """The `kind` a frame is written with (`turn`, `turn_event`, `turn_done`,
    `turn_done_part`, `error`)."""
    return FRAME_KINDS[type(frame)][0]


def frame_is_final(frame: object) -> bool:
    """Whether a frame ends its connection's exchange (`final` as it is written)."""
    return FRAME_KINDS[type(frame)][1]


def _frame_structure(
    converter: cattrs.Converter, classes: dict[str, type]
) -> Callable[[Any, Any], Any]:
    bodies: dict[str, Callable[[Any, Any], Any]] = {
        kind: object_structure(converter, cls) for kind, cls in classes.items()
    }

    def hook(value: Any, tp: Any) -> Any:
        if type(value) is not dict:
            raise InvalidValue("expected an object")
        problems = dict.fromkeys(sorted(value.keys() - _FRAME_KEYS), "unknown field")
        problems |= {key: "missing field" for key in ("kind", "final", "body") if key not in value}
        kind = value.get("kind")
        cls = classes.get(kind) if type(kind) is str else None
        if cls is None and "kind" in value:
            problems["kind"] = f"unknown kind {kind!r}"
        elif cls is not None and "final" in value:
            final = FRAME_KINDS[cls][1]
            if value["final"] is not final:
                problems["final"] = f"expected {str(final).lower()} for kind {kind!r}"
        if problems or cls is None:
            raise fail(cls or tp, problems)
        try:
            return bodies[value["kind"]](value["body"], cls)
        except Exception as exc:
            raise ClassValidationError("invalid frame", [noted(exc, "body", cls)], cls) from exc

    return hook


def _frame_unstructure(converter: cattrs.Converter, cls: type) -> Callable[[Any], dict[str, Any]]:
    kind, final = FRAME_KINDS[cls]
    body = object_unstructure(converter, cls)

    def hook(obj: Any) -> dict[str, Any]:
        return {"kind": kind, "final": final, "body": body(obj)}

    return hook


def register_unions(converter: cattrs.Converter) -> None:
    """Register the tagged classes, the unions read by tag, the nested `ToolCall`, and the
    frames on `converter` (once: `_converter.py` does, for the one converter)."""
    for key, tags in (
        ("type", RECORD_TAGS),
        ("type", EVENT_TAGS),
        ("type", RESPONSE_TAGS),
        ("role", MESSAGE_ROLES),
        ("type", NOTE_TAGS),
        ("type", SCHEDULE_TAGS),
    ):
        _register_tagged(converter, key, tags)
    _register_union(converter, "type", RECORD_TAGS, LogRecord)
    _register_union(converter, "type", NOTE_TAGS, NotesRecord)
    _register_union(converter, "type", SCHEDULE_TAGS, SchedulesRecord)
    _register_union(converter, "type", EVENT_TAGS, ChatEvent)
    _register_union(converter, "type", EVENT_TAGS, TurnEvent)
    _register_union(converter, "type", RESPONSE_TAGS, ToolResponse)
    _register_union(converter, "role", MESSAGE_ROLES, ChatMessage)
    for wire in (_WireFunction, _WireToolCall):
        converter.register_structure_hook(wire, object_structure(converter, wire))
    converter.register_structure_hook(ToolCall, _tool_call_hook(converter))
    converter.register_unstructure_hook(ToolCall, tool_call_unstructure)
    for cls, (kind, _final) in FRAME_KINDS.items():
        converter.register_structure_hook(cls, _frame_structure(converter, {kind: cls}))
        converter.register_unstructure_hook(cls, _frame_unstructure(converter, cls))
    for union in (Frame, BrokerFrame, Watched):  # each socket's frames, read by kind
        members = frozenset(typing.get_args(union))
        by_kind = {kind: cls for cls, (kind, _final) in FRAME_KINDS.items() if cls in members}
        converter.register_structure_hook_func(
            _is_union_of(members), _frame_structure(converter, by_kind)
        )


def _is_union_of(members: frozenset[type]) -> Callable[[Any], bool]:
    return lambda tp: is_union(tp) and frozenset(typing.get_args(tp)) == members
