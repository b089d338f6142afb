"""What `GET /slots` says of one slot (reference: llama-server-wire.md, "/slots"). Pure."""

from __future__ import annotations

from typing import Any

from ..proto import DecodeError, parse_json

__all__ = ["slot_entry"]


def slot_entry(body: bytes | str, slot_id: int) -> dict[str, Any] | None:
    """The entry of `GET /slots`'s answer for `slot_id` (`{"id", "n_ctx", "is_processing",
    ...}`), or None when the answer is not a list of slots or has no such entry. The server
    takes `id_slot` modulo its number of slots, and so does this."""
    try:
        slots = parse_json(body)
    except DecodeError:
        return None
    if not isinstance(slots, list) or not slots:
        return None
    served = slot_id % len(slots)
    for entry in slots:
        if isinstance(entry, dict) and entry.get("id") == served:
            return entry
    return None
