"""The one converter: every JSON shape in the project, and the only way in or out of JSON.

Strategy: one `cattrs.Converter` with strict hooks. Scalars are checked by exact type (no
`int("5")`, no `True` for an int); objects refuse unknown keys; tagged unions put their tag
first (`"type"` for records, events and tool responses, `"role"` for chat messages) and frames
wrap their body as `{"kind", "final", "body"}` with `kind` and `final` derived from the class.
Field order is attrs field order, which is the order SPEC.md lists. Every failure while
structuring becomes one `DecodeError` whose message names the path, e.g.
`expected int @ $.body.usage.cache_n`, built with cattrs' `transform_error`.

JSON text itself is `_json.py` (strict parsing, compact writing); the fast path that reads log
records without cattrs is `_plain.py`. Pure: no I/O, no trio, no httpx.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.v import format_exception, transform_error

from ._chat import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ._events import (
    CacheLoss,
    Content,
    Progress,
    Queued,
    Reasoning,
    Retrying,
    ThinkingCapped,
    ToolCallDelta,
    ToolCallStarted,
    ToolResult,
    Waiting,
)
from ._frames import TurnDoneFrame, TurnEventFrame, TurnFrame, WireError
from ._ids import InvalidValue, SessionId, Timestamp
from ._json import DecodeError, compact, encode, json_str, parse_json
from ._records import (
    AssistantRecord,
    CacheLossRecord,
    EpochEndRecord,
    LogRecord,
    SessionStartRecord,
    ToolResultRecord,
    UsageRecord,
    UserRecord,
)
from ._tools import DeniedResponse, FailedResponse, PendingApprovalResponse, ResultResponse

__all__ = [
    "RECORD_TAGS",
    "DecodeError",
    "dumps",
    "encode",
    "encode_messages",
    "frame_kind",
    "is_union",
    "json_names",
    "loads",
    "parse_json",
    "structure",
    "unstructure",
]

T = TypeVar("T")


# --- JSON names: tags, kinds, renamed fields -----------------------------------------------

RECORD_TAGS: dict[type, str] = {
    SessionStartRecord: "session_start",
    UserRecord: "user",
    AssistantRecord: "assistant",
    UsageRecord: "usage",
    ToolResultRecord: "tool_result",
    CacheLossRecord: "cache_loss",
    EpochEndRecord: "epoch_end",
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
    CacheLoss: "cache_loss",
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
    WireError: ("error", True),
}
_RENAMED = {"data_class": "class"}  # Python cannot name a field `class`
_OMIT_NULLS = {AssistantMessage}  # optional fields left out when null (SPEC section 5)

_converter = cattrs.Converter(detailed_validation=True, forbid_extra_keys=True)


# --- errors with paths ---------------------------------------------------------------------


def _noted(exc: Exception, name: str, cls: type) -> Exception:
    exc.__notes__ = [*getattr(exc, "__notes__", []), AttributeValidationNote(name, name, cls)]
    return exc


def _fail(cls: Any, problems: Mapping[str, str]) -> ClassValidationError:
    """An error at fields of an object: `{"kind": "unknown kind 'x'"}` gives `... @ $.kind`."""
    noted = [_noted(InvalidValue(message), name, cls) for name, message in problems.items()]
    return ClassValidationError("invalid object", noted, cls)


def _fix_notes(exc: ClassValidationError, cls: type, names: Mapping[str, str]) -> None:
    """Make every path name a JSON key.

    cattrs notes carry a field's Python name (`data_class`, not `class`), and an error raised
    by a validator while constructing the object carries no note at all: it names its field
    itself (`InvalidValue.field`).
    """
    for sub in exc.exceptions:
        notes = [
            AttributeValidationNote(str(note), names[note.name], note.type)
            if isinstance(note, AttributeValidationNote) and note.name in names
            else note
            for note in getattr(sub, "__notes__", [])
        ]
        named = any(isinstance(note, AttributeValidationNote) for note in notes)
        if not named and isinstance(sub, InvalidValue) and sub.field is not None:
            name = names.get(sub.field, sub.field)
            notes.append(AttributeValidationNote(name, name, cls))
        sub.__notes__ = notes


def _format(exc: BaseException, tp: type | None) -> str:
    if isinstance(exc, InvalidValue):
        return str(exc)
    if isinstance(exc, KeyError):
        return "missing field"
    return format_exception(exc, tp)


def _decode_error(exc: Exception) -> DecodeError:
    return DecodeError("; ".join(transform_error(exc, "$", _format)))


# --- scalars -------------------------------------------------------------------------------


def _exact(kind: type, name: str) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _tp: Any) -> Any:
        if type(value) is not kind:
            raise InvalidValue(f"expected {name}")
        return value

    return hook


def _float(value: Any, _tp: Any) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
    raise InvalidValue("expected float")


def _timestamp(value: Any, _tp: Any) -> Timestamp:
    if type(value) is not str:
        raise InvalidValue("expected a time string")
    return Timestamp.parse(value)


def _path(value: Any, _tp: Any) -> Path:
    if type(value) is not str:
        raise InvalidValue("expected str")
    return Path(value)


def _enum_hook(cls: type[enum.Enum]) -> Callable[[Any, Any], enum.Enum]:
    by_value = {member.value: member for member in cls}
    allowed = ", ".join(repr(v) for v in by_value)

    def hook(value: Any, _tp: Any) -> enum.Enum:
        if type(value) is str and value in by_value:
            return by_value[value]
        raise InvalidValue(f"expected one of {allowed}")

    return hook


for _kind, _name in ((int, "int"), (str, "str"), (bool, "bool")):
    _converter.register_structure_hook(_kind, _exact(_kind, _name))
_converter.register_structure_hook(float, _float)
_converter.register_structure_hook(Timestamp, _timestamp)
_converter.register_unstructure_hook(Timestamp, str)
_converter.register_structure_hook(SessionId, lambda value, _tp: SessionId(value))
_converter.register_unstructure_hook(SessionId, str)
_converter.register_structure_hook(Path, _path)
_converter.register_unstructure_hook(Path, str)
_converter.register_structure_hook_factory(
    lambda tp: isinstance(tp, type) and issubclass(tp, enum.Enum), _enum_hook
)
_converter.register_unstructure_hook_func(
    lambda tp: isinstance(tp, type) and issubclass(tp, enum.Enum), lambda member: member.value
)


# --- arrays and maps: JSON arrays and objects only, errors by index or key ------------------


def _is_tuple(tp: Any) -> bool:
    args = typing.get_args(tp)
    return typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis


def _tuple_hook(tp: Any) -> Callable[[Any, Any], tuple[Any, ...]]:
    item_type = typing.get_args(tp)[0]

    def hook(value: Any, _tp: Any) -> tuple[Any, ...]:
        if type(value) is not list:
            raise InvalidValue("expected an array")
        items, errors = [], []
        for index, item in enumerate(value):
            try:
                items.append(_converter.structure(item, item_type))
            except Exception as exc:
                note = IterableValidationNote(f"item {index}", index, item_type)
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        if errors:
            raise IterableValidationError("invalid array", errors, tp)
        return tuple(items)

    return hook


def _is_dict(tp: Any) -> bool:
    return typing.get_origin(tp) is dict


def _dict_hook(tp: Any) -> Callable[[Any, Any], dict[str, Any]]:
    key_type, value_type = typing.get_args(tp)
    if key_type is not str:
        raise TypeError(f"JSON objects have string keys, not {key_type!r}")

    def hook(value: Any, _tp: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise InvalidValue("expected an object")
        if value_type is Any:
            return dict(value)
        items, errors = {}, []
        for key, item in value.items():
            try:
                items[key] = _converter.structure(item, value_type)
            except Exception as exc:
                note = IterableValidationNote(f"key {key!r}", key, value_type)
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        if errors:
            raise IterableValidationError("invalid object", errors, tp)
        return items

    return hook


_converter.register_structure_hook_factory(_is_tuple, _tuple_hook)
_converter.register_structure_hook_factory(_is_dict, _dict_hook)


# --- objects -------------------------------------------------------------------------------


def json_names(cls: type) -> dict[str, str]:
    return {a.name: _RENAMED.get(a.name, a.name) for a in attrs.fields(cls)}


def _overrides(cls: type) -> dict[str, Any]:
    return {name: override(rename=json) for name, json in json_names(cls).items() if name != json}


def _object_structure(cls: type[T], tag: tuple[str, str] | None = None) -> Callable[[Any, Any], T]:
    """Structure a JSON object into `cls`: unknown keys refused, `tag` checked when given."""
    generated: Callable[[Any, Any], T] = make_dict_structure_fn(
        cls, _converter, _cattrs_forbid_extra_keys=False, **_overrides(cls)
    )
    names = json_names(cls)
    allowed = set(names.values())
    if tag is not None:
        allowed.add(tag[0])

    def hook(value: Any, _tp: Any) -> T:
        if type(value) is not dict:
            raise InvalidValue("expected an object")
        if tag is not None and value.get(tag[0]) != tag[1]:
            raise _fail(cls, {tag[0]: f"expected {tag[1]!r}"})
        if not value.keys() <= allowed:
            extra = value.keys() - allowed
            raise _fail(cls, dict.fromkeys(sorted(extra), "unknown field"))
        try:
            return generated(value, cls)
        except ClassValidationError as exc:
            _fix_notes(exc, cls, names)
            raise

    return hook


def _object_unstructure(
    cls: type, tag: tuple[str, str] | None = None
) -> Callable[[Any], dict[str, Any]]:
    generated: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(
        cls, _converter, _cattrs_omit_if_default=cls in _OMIT_NULLS, **_overrides(cls)
    )
    if tag is None:
        return generated
    key, name = tag

    def hook(obj: Any) -> dict[str, Any]:
        return {key: name, **generated(obj)}

    return hook


def _register_tagged(key: str, tags: dict[type, str]) -> None:
    """Each class is written with its tag first; the union of all of them is read by tag."""
    for cls, name in tags.items():
        _converter.register_structure_hook(cls, _object_structure(cls, (key, name)))
        _converter.register_unstructure_hook(cls, _object_unstructure(cls, (key, name)))


def _union_structure(key: str, members: dict[str, type]) -> Callable[[Any, Any], Any]:
    def hook(value: Any, tp: Any) -> Any:
        if type(value) is not dict:
            raise InvalidValue("expected an object")
        name = value.get(key)
        cls = members.get(name) if type(name) is str else None
        if cls is None:
            problem = "missing field" if name is None else f"unknown {key} {name!r}"
            raise _fail(tp, {key: problem})
        return _converter.structure(value, cls)

    return hook


def _register_union(key: str, tags: dict[type, str], union: Any) -> None:
    """Read `union` (a `X | Y` alias) by its tag: only the members it names are accepted."""
    members = frozenset(typing.get_args(union))
    by_tag = {name: cls for cls, name in tags.items() if cls in members}
    _converter.register_structure_hook_func(
        lambda tp: is_union(tp) and frozenset(typing.get_args(tp)) == members,
        _union_structure(key, by_tag),
    )


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


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


for _cls in (_WireFunction, _WireToolCall):
    _converter.register_structure_hook(_cls, _object_structure(_cls))


def _tool_call_structure(value: Any, _tp: Any) -> ToolCall:
    wire = _converter.structure(value, _WireToolCall)
    if wire.type != "function":
        raise _fail(ToolCall, {"type": "expected 'function'"})
    return ToolCall(id=wire.id, name=wire.function.name, arguments=wire.function.arguments)


def _tool_call_unstructure(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


_converter.register_structure_hook(ToolCall, _tool_call_structure)
_converter.register_unstructure_hook(ToolCall, _tool_call_unstructure)


# Frames: {"kind": K, "final": F, "body": {...}}, K and F fixed by the body's class.

_FRAME_KEYS = frozenset(("kind", "final", "body"))


def frame_kind(frame: object) -> str:
    """The `kind` a frame is written with (`turn`, `turn_event`, `turn_done`, `error`)."""
    return FRAME_KINDS[type(frame)][0]


def _frame_structure(classes: dict[str, type]) -> Callable[[Any, Any], Any]:
    bodies: dict[str, Callable[[Any, Any], Any]] = {
        kind: _object_structure(cls) for kind, cls in classes.items()
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
            raise _fail(cls or tp, problems)
        try:
            return bodies[value["kind"]](value["body"], cls)
        except Exception as exc:
            raise ClassValidationError("invalid frame", [_noted(exc, "body", cls)], cls) from None

    return hook


def _frame_unstructure(cls: type) -> Callable[[Any], dict[str, Any]]:
    kind, final = FRAME_KINDS[cls]
    body = _object_unstructure(cls)

    def hook(obj: Any) -> dict[str, Any]:
        return {"kind": kind, "final": final, "body": body(obj)}

    return hook


def _register_frames() -> None:
    by_kind = {kind: cls for cls, (kind, _final) in FRAME_KINDS.items()}
    for cls, (kind, _final) in FRAME_KINDS.items():
        _converter.register_structure_hook(cls, _frame_structure({kind: cls}))
        _converter.register_unstructure_hook(cls, _frame_unstructure(cls))
    members = frozenset(FRAME_KINDS)
    _converter.register_structure_hook_func(
        lambda tp: is_union(tp) and frozenset(typing.get_args(tp)) == members,
        _frame_structure(by_kind),
    )


def _register_all() -> None:
    from ._chat import ChatMessage
    from ._events import ChatEvent, TurnEvent
    from ._tools import ToolResponse

    _register_tagged("type", RECORD_TAGS)
    _register_tagged("type", EVENT_TAGS)
    _register_tagged("type", RESPONSE_TAGS)
    _register_tagged("role", MESSAGE_ROLES)
    _register_union("type", RECORD_TAGS, LogRecord)
    _register_union("type", EVENT_TAGS, ChatEvent)
    _register_union("type", EVENT_TAGS, TurnEvent)
    _register_union("type", RESPONSE_TAGS, ToolResponse)
    _register_union("role", MESSAGE_ROLES, ChatMessage)
    _register_frames()
    # Every other attrs class (ToolSchema, Usage, Timings, Config, ...): a plain strict object.
    _converter.register_structure_hook_factory(attrs.has, _object_structure)
    _converter.register_unstructure_hook_factory(attrs.has, _object_unstructure)


_register_all()


# --- the public surface --------------------------------------------------------------------


def unstructure(value: object) -> Any:
    """The JSON value (dicts, lists, str, int, float, bool, None) of a protocol value."""
    return _converter.unstructure(value)


@overload
def structure(raw: Any, tp: type[T]) -> T: ...
@overload
def structure(raw: Any, tp: object) -> Any: ...
def structure(raw: Any, tp: Any) -> Any:
    """Structure a JSON value into `tp` (a class or a union alias such as `LogRecord`).

    Raises:
        DecodeError: naming the path of every problem; never a bare KeyError or cattrs error.
    """
    try:
        return _converter.structure(raw, tp)
    except Exception as exc:
        raise _decode_error(exc) from None


def encode_messages(messages: Sequence[ChatMessage]) -> bytes:
    """`encode([unstructure(m) for m in messages])`, the same bytes, written out by hand.

    A request carries every message of its session; this writes each as JSON text directly
    (no dicts to build, nothing for the garbage collector), several times faster than the
    general path. A test holds the two equal.
    """
    return ("[" + ",".join(_message_text(message) for message in messages) + "]").encode()


def _message_text(message: ChatMessage) -> str:
    kind = type(message)
    if kind is UserMessage or kind is SystemMessage:
        return f'{{"role":"{MESSAGE_ROLES[kind]}","content":{json_str(message.content)}}}'
    if type(message) is ToolMessage:
        return (
            f'{{"role":"tool","tool_call_id":{json_str(message.tool_call_id)},'
            f'"content":{json_str(message.content)}}}'
        )
    if type(message) is AssistantMessage:
        text = f'{{"role":"assistant","content":{json_str(message.content)}'
        if message.reasoning_content is not None:
            text += f',"reasoning_content":{json_str(message.reasoning_content)}'
        if message.tool_calls is not None:
            calls = [_tool_call_unstructure(call) for call in message.tool_calls]
            text += f',"tool_calls":{compact(calls)}'
        return text + "}"
    return compact(_converter.unstructure(message))


# The hot path of a turn: each piece of streamed text becomes one of these frames. Same bytes
# as the general path (a test holds them equal), without building dicts for cattrs.
_TEXT_EVENT_PREFIX: dict[type, bytes] = {
    cls: b'{"kind":"turn_event","final":false,"body":{"event":{"type":"%s","text":' % tag.encode()
    for cls, tag in ((Content, "content"), (Reasoning, "reasoning"))
}


def dumps(value: object) -> bytes:
    """The bytes of a protocol value, keys in SPEC order."""
    if type(value) is TurnEventFrame:
        prefix = _TEXT_EVENT_PREFIX.get(type(value.event))
        if prefix is not None:
            return prefix + json_str(value.event.text).encode() + b"}}}"  # type: ignore[union-attr]
    return encode(_converter.unstructure(value))


@overload
def loads(tp: type[T], data: bytes | str) -> T: ...
@overload
def loads(tp: object, data: bytes | str) -> Any: ...
def loads(tp: Any, data: bytes | str) -> Any:
    """Parse JSON bytes into `tp`.

    Raises:
        DecodeError: for text that is not JSON, or JSON that is not `tp` (with the path).
    """
    return structure(parse_json(data), tp)
