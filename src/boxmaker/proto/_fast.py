"""Every hand-written fast path of the converter, in one place: the same bytes or values as
the general path, without cattrs, where a turn or a resume spends its time.

- `encode_messages` and `encode_chat_body`: a request carries every message of its session;
  each is written as JSON text directly (no dicts to build, nothing for the garbage collector).
- `load_record` and `plain_record`: resuming reads every line of a log; a record of exactly the
  expected shape (every key present, none more, each of its exact type) is built straight from
  its JSON object, and anything else goes the detailed way, which names what is wrong or reads
  it.
- `parse_line`: a log line's JSON text parsed by orjson, which takes 0.9 times the CPU of the
  standard library's scanner; what it refuses goes the detailed way (`parse_json`).

`tests/proto/test_fast.py` and `tests/session/test_log_fast.py` hold each equal to the general
path. Pure.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import attrs
import orjson

from ._chat import AssistantMessage, ChatMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from ._converter import converter, structure
from ._ids import TIME_FORM, Origin, SessionId, Timestamp
from ._json import compact, json_str, parse_json
from ._objects import is_union, json_names
from ._records import LogRecord
from ._unions import MESSAGE_ROLES, RECORD_TAGS

__all__ = [
    "encode_chat_body",
    "encode_messages",
    "load_record",
    "parse_line",
    "plain_record",
    "record_of",
]

T = TypeVar("T")


# --- writing: messages and request bodies --------------------------------------------------


def encode_messages(messages: Sequence[ChatMessage]) -> bytes:
    """`encode([unstructure(m) for m in messages])`, the same bytes, written out by hand.

    A request carries every message of its session; this writes each as JSON text directly
    (no dicts to build, nothing for the garbage collector), several times faster than the
    general path. A test holds the two equal.
    """
    return ("[" + ",".join([_message_text(message) for message in messages]) + "]").encode()


def _message_text(message: ChatMessage) -> str:
    kind = type(message)
    if kind is SystemMessage or (kind is UserMessage and not message.images):  # type: ignore[union-attr]
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
            calls = ",".join([_call_text(call) for call in message.tool_calls])
            text += f',"tool_calls":[{calls}]'
        return text + "}"
    return compact(converter.unstructure(message))


def _call_text(call: ToolCall) -> str:
    """`compact(tool_call_unstructure(call))`, written out by hand."""
    return (
        f'{{"id":{json_str(call.id)},"type":"function","function":{{"name":{json_str(call.name)},'
        f'"arguments":{json_str(call.arguments)}}}}}'
    )


def encode_chat_body(messages: Sequence[ChatMessage], rest: bytes) -> bytes:
    """`encode({"messages": [unstructure(m) ...], **settings})`, the same bytes, where `rest`
    is `encode(settings)` (`b'{"tools":...}'` or `b'{}'`), the messages written by
    `encode_messages`: a request costs as much as its bytes, not a dict per message."""
    tail = b"," + rest[1:] if len(rest) > 2 else b"}"
    return b'{"messages":' + encode_messages(messages) + tail


# --- reading: log records ---------------------------------------------------------------


class _Slow(Exception):
    """Not the plain expected shape: take the detailed path."""


def _plain_exact(kind: type) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if type(value) is not kind:
            raise _Slow
        return value

    return read


def _plain_optional(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else inner(value)


def _plain_enum(cls: type[enum.Enum]) -> Callable[[Any], Any]:
    by_value = {member.value: member for member in cls}

    def read(value: Any) -> Any:
        if type(value) is not str or value not in by_value:
            raise _Slow
        return by_value[value]

    return read


def _plain_timestamp(value: Any) -> Timestamp:
    if type(value) is not str:
        raise _Slow
    return Timestamp.parse(value)  # InvalidValue: the detailed path says it again, with its path


def _plain_session_id(value: Any) -> SessionId:
    return SessionId(value)  # its validator refuses anything else (InvalidValue)


_CALL_KEYS = frozenset(("id", "type", "function"))
_FUNCTION_KEYS = frozenset(("name", "arguments"))


def _plain_tool_calls(value: Any) -> tuple[ToolCall, ...]:
    if type(value) is not list:
        raise _Slow
    calls = []
    for item in value:
        if type(item) is not dict or item.keys() != _CALL_KEYS or item["type"] != "function":
            raise _Slow
        function = item["function"]
        if type(function) is not dict or function.keys() != _FUNCTION_KEYS:
            raise _Slow
        call_id, name, arguments = item["id"], function["name"], function["arguments"]
        if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
            raise _Slow
        call = _new(ToolCall)
        _set_call_id(call, call_id)
        _set_call_name(call, name)
        _set_call_arguments(call, arguments)
        calls.append(call)
    return tuple(calls)


def _plain_field(tp: Any) -> Callable[[Any], Any]:
    if tp in (str, int, bool):
        return _plain_exact(tp)
    if tp is Timestamp:
        return _plain_timestamp
    if tp is SessionId:
        return _plain_session_id
    if tp is Origin:
        return _plain_origin
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _plain_enum(tp)
    if tp == tuple[ToolCall, ...]:
        return _plain_tool_calls
    args = typing.get_args(tp)
    if is_union(tp) and len(args) == 2 and type(None) in args:
        return _plain_optional(_plain_field(next(a for a in args if a is not type(None))))
    if typing.get_origin(tp) is tuple:  # a rare field, left out at its default (`kept`)
        return _left_out
    if attrs.has(tp):  # an object, read the detailed way (a turn's `settings`)
        return _slow
    raise TypeError(f"no fast path for a field of type {tp!r}")


def _plain_origin(value: Any) -> Origin:
    """An origin's object, exactly `{channel, id}` (its validator checks their length)."""
    if type(value) is not dict or len(value) != 2:
        raise _Slow
    return Origin(value["channel"], value["id"])


def _left_out(value: Any) -> Any:
    """A field the fast path reads only when it is left out (its default, the empty tuple):
    a record holding it goes the detailed way."""
    if value == ():  # a JSON array is a list, never equal to it
        return value
    raise _Slow


def _slow(value: Any) -> Any:
    raise _Slow


def _direct(cls: type) -> bool:
    """Whether `cls` can be built by setting its slots one by one, as its `__init__` would:
    a slotted attrs class without validators, converters or a post-init hook."""
    return (
        "__slots__" in cls.__dict__
        and not hasattr(cls, "__attrs_post_init__")
        and not hasattr(cls, "__attrs_pre_init__")
        and all(a.validator is None and a.converter is None for a in attrs.fields(cls))
    )


def _plain_structure(cls: type[T]) -> Callable[[dict[str, Any]], T]:
    """Build `cls` from an object of exactly its shape (its tag, which the caller has looked
    up, and its fields), else raise `_Slow`, `KeyError` or `ValueError`.

    The function is generated, as cattrs generates its own: one line per field, the exact
    type checks of str, int, bool, their optionals, enums and times written inline, a reader
    for the other fields. A field left out at its default (`omit_if_default`, one added after
    its record's first version) may be absent. A class without validators is built by
    setting its slots, as its `__init__` does.
    """
    hints = typing.get_type_hints(cls)
    names = json_names(cls)
    fields = attrs.fields(cls)  # type: ignore[arg-type]  # an attrs class: `_PLAIN_RECORDS`
    omitted = {a.name: a.default for a in fields if a.metadata.get("omit_if_default")}
    scope: dict[str, Any] = {
        "cls": cls,
        "_Slow": _Slow,
        "new": object.__new__,
        "Timestamp": Timestamp,
        "time_form": TIME_FORM.fullmatch,
        "set_time": _slot_setter(Timestamp, "value"),
        "from_iso": datetime.fromisoformat,
    }
    # Every name present (but those that may be left out) and no other: as many keys as the
    # tag, the fields that must be there and those of the others that are (`value[...]`
    # raises KeyError for one missing).
    present = "".join(f" + ({names[name]!r} in value)" for name in omitted)
    body = [
        "def structure(value):",
        f"    if len(value) != {len(names) - len(omitted) + 1}{present}:",
    ]
    body.append("        raise _Slow")
    args = []
    for index, (name, json) in enumerate(names.items()):
        tp, var = hints[name], f"v{index}"
        if name in omitted:
            scope[f"default{index}"] = omitted[name]
            body.append(f"    {var} = value.get({json!r}, default{index})")
        else:
            body.append(f"    {var} = value[{json!r}]")
        args.append(var)
        inner = _optional_of(tp)
        if tp in (str, int, bool):
            body.append(f"    if type({var}) is not {tp.__name__}:\n        raise _Slow")
        elif inner in (str, int, bool):
            body.append(
                f"    if {var} is not None and type({var}) is not {inner.__name__}:\n"
                "        raise _Slow"
            )
        elif tp is Timestamp:  # Timestamp.parse, without its errors (the detailed path's)
            body.append(f"    if type({var}) is not str or time_form({var}) is None:")
            body.append("        raise _Slow")
            body.append(f"    {var}, moment = new(Timestamp), from_iso({var})")
            body.append(f"    set_time({var}, moment)")
        elif isinstance(tp, type) and issubclass(tp, enum.Enum):
            scope[f"members{index}"] = {member.value: member for member in tp}
            body.append(f"    {var} = members{index}.get({var}) if type({var}) is str else None")
            body.append(f"    if {var} is None:\n        raise _Slow")
        else:
            scope[f"read{index}"] = _plain_field(tp)
            body.append(f"    {var} = read{index}({var})")
    if _direct(cls):
        body.append("    made = new(cls)")
        for index, name in enumerate(names):
            scope[f"set{index}"] = _slot_setter(cls, name)
            body.append(f"    set{index}(made, v{index})")
        body.append("    return made")
    else:
        body.append(f"    return cls({', '.join(args)})")
    exec("\n".join(body), scope)  # the source is made above from the class's own fields
    structure: Callable[[dict[str, Any]], T] = scope["structure"]
    return structure


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """What sets the slot `name` of a `cls` (as a frozen class's `__init__` does)."""
    setter: Callable[[Any, Any], None] = cls.__dict__[name].__set__
    return setter


def _optional_of(tp: Any) -> Any:
    """`X` for `X | None`, else None."""
    args = typing.get_args(tp)
    if is_union(tp) and len(args) == 2 and type(None) in args:
        return next(a for a in args if a is not type(None))
    return None


# A tool call is built as its `__init__` would (`_direct`), one setter per slot.
assert _direct(ToolCall)
_new = object.__new__
_set_call_id = _slot_setter(ToolCall, "id")
_set_call_name = _slot_setter(ToolCall, "name")
_set_call_arguments = _slot_setter(ToolCall, "arguments")

_PLAIN_RECORDS: dict[str, Callable[[dict[str, Any]], LogRecord]] = {
    name: _plain_structure(cls) for cls, name in RECORD_TAGS.items()
}


def parse_line(line: bytes) -> Any:
    """The JSON value of a log line (its newline allowed), parsed the fast way; None when
    orjson refuses it (as it refuses what is not strict JSON: bad UTF-8, a lone surrogate,
    NaN), and for `null`: neither is a record.

    Where it could read a line otherwise than `parse_json`, the value is no record's plain
    shape: orjson reads a number past 64 bits as a float, and takes values nested deeper than
    `parse_json` does; `plain_record` takes neither, and the detailed way reads the line again.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def load_record(line: bytes | str) -> LogRecord:
    """`loads(LogRecord, line)`, the same in every outcome, fast for a plain record.

    Raises:
        DecodeError: as `loads` does.
    """
    return record_of(parse_json(line))


def record_of(value: Any) -> LogRecord:
    """`structure(value, LogRecord)` for a parsed JSON value, fast for a plain record.

    Raises:
        DecodeError: as `structure` does.
    """
    record = plain_record(value) if type(value) is dict else None
    if record is None:  # the detailed path finds what is wrong, or reads it after all
        record = structure(value, LogRecord)
    return record


def plain_record(value: dict[str, Any]) -> LogRecord | None:
    """The record of a JSON object of exactly a record's plain shape, as `structure` would
    build it; None for any other object (never an error: `record_of` says what is wrong).

    A record it builds holds only strings, numbers, booleans, nulls and, in `tool_calls`,
    objects three levels down: so the object it was built from was never too deep for
    `parse_json`.
    """
    tag = value.get("type")
    plain = _PLAIN_RECORDS.get(tag) if type(tag) is str else None
    if plain is None:
        return None
    try:
        return plain(value)
    except (_Slow, KeyError, ValueError):  # ValueError: InvalidValue, or not a real time
        return None
