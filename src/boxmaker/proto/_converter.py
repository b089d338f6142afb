"""The one converter: the strict cattrs hooks behind every JSON shape in the project.

Strategy: one `cattrs.Converter` with strict hooks. Scalars are checked by exact type (no
`int("5")`, no `True` for an int); objects refuse unknown keys. Field order is attrs field
order, which is the order SPEC.md lists. Every failure while structuring becomes one
`DecodeError` whose message names the path, e.g. `expected int @ $.body.usage.cache_n`, built
with cattrs' `transform_error`.

The tagged unions and frames are registered on this converter by `_unions.py`; JSON text itself
is `_json.py`; the hand-written fast paths are `_fast.py`. Pure: no I/O, no trio, no httpx.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping
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

from ._chat import AssistantMessage
from ._ids import InvalidValue, SessionId, Timestamp
from ._json import DecodeError, parse_json
from ._records import Baseline

__all__ = [
    "converter",
    "fail",
    "is_union",
    "json_names",
    "loads",
    "noted",
    "object_structure",
    "object_unstructure",
    "structure",
    "unstructure",
]

T = TypeVar("T")

_RENAMED = {"data_class": "class", "break_": "break"}  # JSON names that are Python keywords
# Optional fields left out when null: an assistant message's (SPEC section 5), and the
# baseline's `fenced`, so a native session's baseline keeps the bytes it always had.
_OMIT_NULLS = {AssistantMessage, Baseline}

converter = cattrs.Converter(detailed_validation=True, forbid_extra_keys=True)


# --- errors with paths ---------------------------------------------------------------------


def noted(exc: Exception, name: str, cls: type) -> Exception:
    exc.__notes__ = [*getattr(exc, "__notes__", []), AttributeValidationNote(name, name, cls)]
    return exc


def fail(cls: Any, problems: Mapping[str, str]) -> ClassValidationError:
    """An error at fields of an object: `{"kind": "unknown kind 'x'"}` gives `... @ $.kind`."""
    errors = [noted(InvalidValue(message), name, cls) for name, message in problems.items()]
    return ClassValidationError("invalid object", errors, cls)


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


# --- objects -------------------------------------------------------------------------------


def json_names(cls: type) -> dict[str, str]:
    return {a.name: _RENAMED.get(a.name, a.name) for a in attrs.fields(cls)}


def _overrides(cls: type) -> dict[str, Any]:
    """A field's JSON name, and whether it is left out when it holds its default (a field added
    to a wire shape after its first version, marked `omit_if_default` in its metadata)."""
    names = json_names(cls)
    return {
        a.name: override(rename=names[a.name], omit_if_default=True)
        if a.metadata.get("omit_if_default")
        else override(rename=names[a.name])
        for a in attrs.fields(cls)
        if names[a.name] != a.name or a.metadata.get("omit_if_default")
    }


def object_structure(cls: type[T], tag: tuple[str, str] | None = None) -> Callable[[Any, Any], T]:
    """Structure a JSON object into `cls`: unknown keys refused, `tag` checked when given.

    cattrs' function for `cls` is generated at its first use, not here: every class's hooks
    are registered when `proto` is imported, and generating them all then was a third of
    `bxctl sessions`' start."""
    generated: Callable[[Any, Any], T] | None = None
    names = json_names(cls)
    allowed = set(names.values())
    if tag is not None:
        allowed.add(tag[0])

    def hook(value: Any, _tp: Any) -> T:
        if type(value) is not dict:
            raise InvalidValue("expected an object")
        if tag is not None and value.get(tag[0]) != tag[1]:
            raise fail(cls, {tag[0]: f"expected {tag[1]!r}"})
        if not value.keys() <= allowed:
            extra = value.keys() - allowed
            raise fail(cls, dict.fromkeys(sorted(extra), "unknown field"))
        nonlocal generated
        if generated is None:
            generated = make_dict_structure_fn(
                cls, converter, _cattrs_forbid_extra_keys=False, **_overrides(cls)
            )
        try:
            return generated(value, cls)
        except ClassValidationError as exc:
            _fix_notes(exc, cls, names)
            raise

    return hook


def object_unstructure(
    cls: type, tag: tuple[str, str] | None = None
) -> Callable[[Any], dict[str, Any]]:
    """Unstructure `cls` into a JSON object, its `tag` first when given (cattrs' function
    generated at its first use, as in `object_structure`)."""
    generated: Callable[[Any], dict[str, Any]] | None = None
    head = {} if tag is None else {tag[0]: tag[1]}

    def hook(obj: Any) -> dict[str, Any]:
        nonlocal generated
        if generated is None:
            generated = make_dict_unstructure_fn(
                cls, converter, _cattrs_omit_if_default=cls in _OMIT_NULLS, **_overrides(cls)
            )
        return {**head, **generated(obj)} if head else generated(obj)

    return hook


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


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
