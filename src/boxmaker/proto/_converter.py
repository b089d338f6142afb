"""The one converter: the strict cattrs hooks behind every JSON shape in the project, and the
public surface over it (`structure`, `unstructure`, `loads`, `dumps`).

Strategy: one `cattrs.Converter` with strict hooks. Scalars are checked by exact type (no
`int("5")`, no `True` for an int); objects refuse unknown keys (`_objects.py`). Field order is
attrs field order, which is the order SPEC.md lists. Every failure while structuring becomes
one `DecodeError` whose message names the path, e.g. `expected int @ $.body.usage.cache_n`,
built with cattrs' `transform_error`. The tagged unions and frames are registered here, by
`_unions.register_unions`, once the plain hooks are; JSON text itself is `_json.py`; the
hand-written paths for what a turn or a resume does per message, record or token are
`_fast.py`, held equal to this one by tests. Pure: no I/O, no trio, no httpx.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.v import format_exception, transform_error

from ._chat import UserMessage, user_message_unstructure
from ._events import Content, Reasoning
from ._frames import TurnEventFrame
from ._ids import InvalidValue, SessionId, Timestamp
from ._json import DecodeError, encode, json_str, parse_json
from ._objects import object_structure, object_unstructure
from ._unions import register_unions

__all__ = ["converter", "dumps", "loads", "structure", "unstructure"]

T = TypeVar("T")

converter = cattrs.Converter(detailed_validation=True, forbid_extra_keys=True)


# --- errors with paths ---------------------------------------------------------------------


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
    converter.register_structure_hook(_kind, _exact(_kind, _name))
converter.register_structure_hook(float, _float)
converter.register_structure_hook(Timestamp, _timestamp)
converter.register_unstructure_hook(Timestamp, str)
converter.register_structure_hook(SessionId, lambda value, _tp: SessionId(value))
converter.register_unstructure_hook(SessionId, str)
converter.register_structure_hook(Path, _path)
converter.register_unstructure_hook(Path, str)
converter.register_structure_hook_factory(
    lambda tp: isinstance(tp, type) and issubclass(tp, enum.Enum), _enum_hook
)
converter.register_unstructure_hook_func(
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
                items.append(converter.structure(item, item_type))
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
                items[key] = converter.structure(item, value_type)
            except Exception as exc:
                note = IterableValidationNote(f"key {key!r}", key, value_type)
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        if errors:
            raise IterableValidationError("invalid object", errors, tp)
        return items

    return hook


converter.register_structure_hook_factory(_is_tuple, _tuple_hook)
converter.register_structure_hook_factory(_is_dict, _dict_hook)


# --- the tagged unions and frames, then every other attrs class ----------------------------

register_unions(converter)
converter.register_unstructure_hook(UserMessage, user_message_unstructure)  # images: parts
# ToolSchema, Usage, Timings, Config, ...: a plain strict object.
converter.register_structure_hook_factory(attrs.has, lambda cls: object_structure(converter, cls))
converter.register_unstructure_hook_factory(
    attrs.has, lambda cls: object_unstructure(converter, cls)
)


# --- the public surface --------------------------------------------------------------------


def unstructure(value: object) -> Any:
    """The JSON value (dicts, lists, str, int, float, bool, None) of a protocol value."""
    return converter.unstructure(value)


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
        return converter.structure(raw, tp)
    except Exception as exc:
        raise _decode_error(exc) from exc


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
    return encode(converter.unstructure(value))
