"""How a mistake in a TOML file is said, for config.toml and policy.toml alike: `<what was
expected> @ $.<key>`, and an unknown key near a known one with "; did you mean ...?". Pure.

The one converter decides what is wrong (`proto.structure`); this module only says where. It
reads the cattrs errors the converter's `DecodeError` was raised from: their notes name each key
on the way down and, for an unknown key, the class that refused it, whose known keys give the
nearest name. A key is said as the file writes it: `$.grants."mcp.fetch".decision`,
`$.examples[0].tool`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
from cattrs.errors import AttributeValidationNote, ClassValidationError, IterableValidationError
from cattrs.v import format_exception

from ..proto import DecodeError, InvalidValue, json_names

__all__ = ["key_name", "key_path", "mistakes", "unknown_field"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_UNKNOWN = "unknown field"  # what the converter says of a key its class does not have


def key_name(name: str) -> str:
    """A key as TOML writes it: bare when it can be, else quoted (`"mcp.fetch"`)."""
    return name if _BARE.fullmatch(name) else json.dumps(name)


def key_path(*parts: str | int) -> str:
    """Where a value is, from the top of the file: `key_path("examples", 0, "tool")` is
    `$.examples[0].tool`."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{key_name(p)}" for p in parts)


def unknown_field(path: str, name: str, known: Iterable[str]) -> str:
    """`unknown field @ <path>`, with the nearest of the `known` names when one is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"{_UNKNOWN} @ {path}" + (f"; did you mean {close[0]!r}?" if close else "")


def mistakes(error: DecodeError, *within: str | int) -> list[str]:
    """Each mistake `proto.structure` found, as `<what was expected> @ <key>`, in the order the
    converter met them; the keys start at `within` (where the structured value sits in the
    file). An unknown key adds the nearest known one (`did you mean 'decision'?`).

    Never raises: a `DecodeError` not raised from a cattrs error is said as it is."""
    cause = error.__cause__
    if cause is None:
        return [str(error)]
    return list(_said(cause, within, None))


def _said(exc: BaseException, at: tuple[str | int, ...], tp: Any) -> Iterator[str]:
    if isinstance(exc, ClassValidationError | IterableValidationError):
        noted, bare = exc.group_exceptions()
        for sub, note in noted:
            part = note.name if isinstance(note, AttributeValidationNote) else note.index
            yield from _said(sub, (*at, part), note.type)
        for sub in bare:
            yield from _said(sub, at, None)
    elif isinstance(exc, InvalidValue) and str(exc) == _UNKNOWN and at and attrs.has(tp):
        # The converter notes an unknown key with the class that refused it.
        yield unknown_field(key_path(*at), str(at[-1]), json_names(tp).values())
    elif isinstance(exc, InvalidValue):
        yield f"{exc} @ {key_path(*at)}"
    elif isinstance(exc, KeyError):
        yield f"missing field @ {key_path(*at)}"
    else:
        yield f"{format_exception(exc, tp)} @ {key_path(*at)}"
