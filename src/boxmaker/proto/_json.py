"""JSON text in and out, strict and compact: the bottom of the one converter (`_converter.py`)
and of the fast paths that write or read JSON text by hand. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "DecodeError",
    "compact",
    "encode",
    "json_str",
    "parse_json",
    "spaced",
]

# Arrays and objects nested deeper than this are refused: no shape of the project goes past a
# handful of levels, and a value a thousand deep would make the parser, the converter or the
# encoder run out of stack (`RecursionError`) wherever it next went.
MAX_DEPTH = 100


class DecodeError(ValueError):
    """Bytes or a JSON value that are not the shape asked for; the message names the path."""


compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
# A JSON string as `compact` writes it (no ASCII escaping), by the encoder's own C function.
json_str: Callable[[str], str] = json.encoder.encode_basestring
# The text of Python's `json.dumps` (", " and ": " between items, every character past ASCII
# escaped), without NaN: the form loopd's hints (`server.json`, a slot save's note) and the
# recall index's places were always written in, kept byte for byte. ASCII only.
spaced: Callable[[Any], str] = json.JSONEncoder(allow_nan=False).encode


def encode(raw: Any) -> bytes:
    """Compact UTF-8 JSON: no spaces, no ASCII escaping, no NaN."""
    return compact(raw).encode()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise _DuplicateKey(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return obj


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)  # made once: json.loads with
# an argument makes a new decoder on every call
_scan_once = _DECODER.scan_once  # type: ignore[attr-defined]
_UNIQUE = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)

# A `\uD800`-style escape can decode to a lone surrogate, which cannot be written back as
# UTF-8; where such an escape appears, the parsed value is checked whole.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_json(data: bytes | str, *, unique_keys: bool = False) -> Any:
    """Parse strict JSON text (UTF-8 when bytes).

    `unique_keys`: refuse an object that names a key twice (JSON parsers disagree on which
    one wins, so a peer could show a checker one value and the code another).

    Raises:
        DecodeError: "not JSON: ..." for invalid UTF-8, invalid JSON, NaN or Infinity, or a
            string with a lone surrogate; arrays and objects nested deeper than `MAX_DEPTH`;
            a key named twice, with `unique_keys`.
    """
    try:
        text = data.decode() if isinstance(data, bytes | bytearray) else data
        if unique_keys:
            value = _UNIQUE.decode(text)
        else:
            try:  # the decoder's own scanner: one value filling the text, as compact JSON is
                value, end = _scan_once(text, 0)
            except StopIteration:
                end = -1
            if end != len(text):  # white space around it, or an error for the decoder to word
                value = _DECODER.decode(text)
        if "\\u" in text and _SURROGATE_ESCAPE.search(text):
            json.dumps(value, ensure_ascii=False).encode()
    except _DuplicateKey as exc:
        raise DecodeError(str(exc)) from exc
    except RecursionError:  # its traceback, a thousand frames deep, says nothing more
        raise DecodeError(f"arrays or objects nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeError, ValueError) as exc:
        raise DecodeError(f"not JSON: {exc}") from exc
    # Counting brackets is cheap; only text with enough of them can be too deep.
    if text.count("[") + text.count("{") > MAX_DEPTH and _too_deep(value):
        raise DecodeError(f"arrays or objects nested deeper than {MAX_DEPTH} levels")
    return value


def _too_deep(value: Any) -> bool:
    """Whether `value` nests arrays and objects more than `MAX_DEPTH` deep (without recursion,
    which is what such a value would exhaust)."""
    stack = [(value, 1)] if type(value) is dict or type(value) is list else []
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = item.values() if type(item) is dict else item
        stack.extend((c, depth + 1) for c in children if type(c) is dict or type(c) is list)
    return False
