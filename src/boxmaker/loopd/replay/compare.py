"""The first difference between a recorded log and its replay, line by line. Pure.

Lines are compared as bytes, and two that differ as records, their chain (`seq`, `prev`,
`hash`) left out. Of the first pair that differs, it says the record's type, the first field
whose value differs (a nested one by its path: `settings.config.loop`) and the first byte
where the records part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from ...proto import DecodeError, encode, parse_json
from .tape import Place

__all__ = ["Difference", "first_difference"]

_CHAIN = ("seq", "prev", "hash")


@frozen
class Difference:
    """Where a replay first departs from its recording: the line's place in each (the same
    place unless one side has a line the other does not), the recorded record's type (or the
    replayed one's), the field, the first differing byte, and both lines (None: no line)."""

    recorded_at: Place | None
    replayed_at: Place | None
    record: str
    field: str | None
    offset: int
    recorded: bytes | None
    replayed: bytes | None
    why: str = ""  # when the replay stopped short of a line: what it asked for


def first_difference(
    recorded: Sequence[tuple[Place, bytes]],
    replayed: Sequence[tuple[Place, bytes]],
    *,
    settings: bool = True,
) -> Difference | None:
    """The first difference between two runs of lines, each line with its place. Two lines
    whose bytes differ only in their chain (a line before differed in what `settings=False`
    leaves out: a turn's recorded settings, when replayed under another config) are alike."""
    for index in range(max(len(recorded), len(replayed))):
        old = recorded[index] if index < len(recorded) else None
        new = replayed[index] if index < len(replayed) else None
        if old is not None and new is not None:
            if old[1] == new[1]:
                continue
            if _record(old[1], settings) == _record(new[1], settings) != {}:
                continue
        return difference(old, new, settings=settings)
    return None


def difference(
    old: tuple[Place, bytes] | None,
    new: tuple[Place, bytes] | None,
    why: str = "",
    *,
    settings: bool = True,
) -> Difference:
    """The difference between a recorded line and a replayed one (either may be missing):
    the first byte where the records part, the chain aside."""
    old_line = old[1] if old else None
    new_line = new[1] if new else None
    old_value, new_value = _record(old_line, settings), _record(new_line, settings)
    kind = old_value.get("type") or new_value.get("type") or "?"
    return Difference(
        recorded_at=old[0] if old else None,
        replayed_at=new[0] if new else None,
        record=str(kind),
        field=_field(old_value, new_value) if old and new else None,
        offset=_offset(encode(old_value), encode(new_value)),
        recorded=old_line,
        replayed=new_line,
        why=why,
    )


def _record(line: bytes | None, settings: bool) -> dict[str, Any]:
    """A line's record as a JSON object, its chain left out (and a turn's settings, unless
    `settings`); {} for a line that is none."""
    if line is None:
        return {}
    try:
        value = parse_json(line)
    except DecodeError:
        return {}
    if type(value) is not dict:
        return {}
    left_out = _CHAIN if settings else (*_CHAIN, "settings")
    return {key: item for key, item in value.items() if key not in left_out}


def _field(old: dict[str, Any], new: dict[str, Any], path: str = "") -> str | None:
    keys = [*old, *(key for key in new if key not in old)]
    for key in keys:
        if old.get(key, _MISSING) == new.get(key, _MISSING):
            continue
        name = f"{path}{key}"
        a, b = old.get(key), new.get(key)
        if type(a) is dict and type(b) is dict:
            return _field(a, b, f"{name}.") or name
        return name
    return None


def _offset(a: bytes, b: bytes) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


_MISSING = object()
