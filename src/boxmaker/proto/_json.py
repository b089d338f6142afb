"""JSON text in and out, strict and compact: the bottom of the one converter (`_convert.py`)
and of the fast paths that write or read JSON text by hand. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["OMIT_IF_DEFAULT", "DecodeError", "compact", "encode", "json_str", "parse_json"]


# An attrs field's metadata key: the converter leaves the field out of the JSON at its default
# (a field added to a shape that was already written, such as `TurnFrame.new_epoch`).
OMIT_IF_DEFAULT = "omit_if_default"


class DecodeError(ValueError):
    """Bytes or a JSON value that are not the shape asked for; the message names the path."""


compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
# A JSON string as `compact` writes it (no ASCII escaping), by the encoder's own C function.
json_str: Callable[[str], str] = json.encoder.encode_basestring


def encode(raw: Any) -> bytes:
    """Compact UTF-8 JSON: no spaces, no ASCII escaping, no NaN."""
    return compact(raw).encode()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)  # made once: json.loads with
# an argument makes a new decoder on every call
_scan_once = _DECODER.scan_once  # type: ignore[attr-defined]

# A `\uD800`-style escape can decode to a lone surrogate, which cannot be written back as
# UTF-8; where such an escape appears, the parsed value is checked whole.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_json(data: bytes | str) -> Any:
    """Parse strict JSON text (UTF-8 when bytes).

    Raises:
        DecodeError: "not JSON: ..." for invalid UTF-8, invalid JSON, NaN or Infinity, or a
            string with a lone surrogate.
    """
    try:
        text = data.decode() if isinstance(data, bytes | bytearray) else data
        try:  # the decoder's own scanner: one value filling the text, as compact JSON is
            value, end = _scan_once(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):  # white space around it, or an error for the decoder to word
            value = _DECODER.decode(text)
        if "\\u" in text and _SURROGATE_ESCAPE.search(text):
            json.dumps(value, ensure_ascii=False).encode()
    except (UnicodeError, ValueError) as exc:
        raise DecodeError(f"not JSON: {exc}") from None
    return value
