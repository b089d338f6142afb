"""The policy file's words (its decisions) and its reading, its errors said as config.toml's:
`<what was expected> @ $.<key>`. Pure."""

from __future__ import annotations

import difflib
import enum
import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["REQUIRED", "Decision", "PolicyError", "key", "name", "shown", "table", "value"]


class Decision(enum.Enum):
    ALLOW = "allow"
    ASK = "ask"  # the owner is asked each time
    DENY = "deny"


class PolicyError(Exception):
    """The policy cannot be used; the message names the file, the key and what was expected."""


REQUIRED: Any = object()
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def name(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key)


def key(*parts: str | int) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{name(p)}" for p in parts)


def shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def table(value: Any, at: tuple[str | int, ...], known: Sequence[str] = ()) -> dict[str, Any]:
    """`value` as a table whose keys are all `known` (any key, when none are)."""
    if type(value) is not dict:
        raise PolicyError(f"expected a table, got {shown(value)} @ {key(*at)}")
    for name in value if known else ():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise PolicyError(f"unknown field @ {key(*at, name)}{hint}")
    return value


def value(table: dict[str, Any], name: str, kind: type, default: Any, *at: str | int) -> Any:
    """The key's value, of type `kind` (an enum: one of its values' words)."""
    value = table.get(name, default)
    if value is REQUIRED:
        raise PolicyError(f"required field missing @ {key(*at, name)}")
    if not issubclass(kind, enum.Enum):
        if type(value) is kind:
            return value
        raise PolicyError(f"expected {kind.__name__}, got {shown(value)} @ {key(*at, name)}")
    if value in (words := [member.value for member in kind]):
        return kind(value)
    expected = ", ".join(f'"{word}"' for word in words)
    raise PolicyError(f"expected one of {expected}, got {shown(value)} @ {key(*at, name)}")
