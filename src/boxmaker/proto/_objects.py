"""How the one converter reads and writes an object: strict (unknown keys refused, a tag
checked), its JSON names (`class` for `data_class`), and errors whose paths name JSON keys.
Each hook is made for a converter (`_converter.py` makes the one). Pure.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote, ClassValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._chat import AssistantMessage
from ._ids import InvalidValue
from ._records import Baseline

__all__ = [
    "fail",
    "is_union",
    "json_names",
    "noted",
    "object_structure",
    "object_unstructure",
]

T = TypeVar("T")

_RENAMED = {"data_class": "class", "break_": "break"}  # JSON names that are Python keywords
# Optional fields left out when null: an assistant message's (SPEC section 5), and the
# baseline's `fenced`, so a native session's baseline keeps the bytes it always had.
_OMIT_NULLS = {AssistantMessage, Baseline}


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


def object_structure(
    converter: cattrs.Converter, cls: type[T], tag: tuple[str, str] | None = None
) -> Callable[[Any, Any], T]:
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
    converter: cattrs.Converter, cls: type, tag: tuple[str, str] | None = None
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
