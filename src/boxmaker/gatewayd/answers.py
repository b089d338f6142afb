"""An answer as the room sees it: split into messages that each fit one event, and the keys
that make each post happen once. Pure.

A Matrix event holds at most 64 KiB, and the edit that carries an answer's last form holds
its text four times (the edit's `body` and `m.new_content`'s, each as text and as HTML). A part
is cut where its text, as JSON, would pass `PART_JSON` bytes (at a line's end when one is
near), so each edit fits whatever the text's characters; its HTML goes only when the whole
edit still fits (`EDIT_BYTES`), else the part is sent as plain text. No part is lost or cut
inside a character; the parts joined are the answer.

Keys: every post the gateway makes for an owner's message derives its key from that
message's id (`key_of`), so after a crash the same post is asked for again under the same
key, and the homeserver (Matrix's transaction ids) makes it once.
"""

from __future__ import annotations

import hashlib
import json

from .markdown import to_html

__all__ = ["EDIT_BYTES", "PART_JSON", "fitted_html", "key_of", "split_answer"]

PART_JSON = 12_000  # bytes of a part's text as a JSON string
EDIT_BYTES = 60_000  # of an edit's content as JSON (the event's envelope takes the rest of 64 KiB)
_NEAR = 2_000  # characters back from a cut that a line's end may be looked for


def key_of(*parts: str) -> str:
    """A key for a post, the same for the same parts: 32 hex characters."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def _json_len(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode())


def split_answer(text: str, limit: int = PART_JSON) -> list[str]:
    """`text` in parts whose JSON is at most `limit` bytes each (one empty part for no text)."""
    parts: list[str] = []
    rest = text
    while _json_len(rest) > limit:
        low, high = 1, len(rest)  # the most characters whose JSON fits
        while low < high:
            middle = (low + high + 1) // 2
            if _json_len(rest[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        line_end = rest.rfind("\n", max(low - _NEAR, 1), low)
        cut = line_end + 1 if line_end > 0 else low
        parts.append(rest[:cut])
        rest = rest[cut:]
    parts.append(rest)
    return parts


def fitted_html(text: str) -> str | None:
    """The part's HTML when an edit that carries it twice, with its text twice, fits."""
    html = to_html(text)
    if html is None:
        return None
    size = 2 * _json_len(text) + 2 * _json_len(html) + 1_000  # the rest of the edit's keys
    return html if size <= EDIT_BYTES else None
