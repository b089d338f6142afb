"""What llama-server says of itself, parsed: which process it is and how it is set up
(`GET /props`), and one slot's state (`GET /slots`). Reference: llama-server-wire.md. Pure.

A server's start identity is `/props`' `media_marker`, drawn at random by each server process
(a new `build_info` or `model_path` also means a new process): the prompt cache uses it to
tell a restart from an eviction. Every field is the server's bytes and is bounded here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from attrs import frozen

from ...proto import DecodeError, parse_json

__all__ = ["ServerIdentity", "identity_of", "settings_warnings", "slot_entry"]

_MAX_FIELD = 4096  # characters kept of an identity field: the server's answer is not ours


@frozen
class ServerIdentity:
    """What tells one llama-server process from the next (`GET /props`)."""

    media_marker: str
    build_info: str
    model_path: str

    def changed_from(self, before: ServerIdentity) -> str | None:
        """The first field that differs from `before`, in words; None when the same process."""
        for name in ("media_marker", "build_info", "model_path"):
            if getattr(self, name) != getattr(before, name):
                return f"/props {name} changed"
        return None


def identity_of(props: Any) -> ServerIdentity | None:
    """The identity in a `/props` answer, None when it has no `media_marker` (another server,
    or an older llama-server): then no restart can be told from it."""
    if not isinstance(props, dict):
        return None
    fields = [props.get(name) for name in ("media_marker", "build_info", "model_path")]
    if not isinstance(fields[0], str) or not fields[0]:
        return None
    marker, build, model = (f[:_MAX_FIELD] if isinstance(f, str) else "" for f in fields)
    return ServerIdentity(media_marker=marker, build_info=build, model_path=model)


def settings_warnings(
    props: Any, slot_ids: Iterable[int], tier_ids: Iterable[int] = ()
) -> list[str]:
    """What the server's settings in `/props` say will lose sessions' prefixes, in words:
    `slot_ids` are those `[slots]` puts on the server, `tier_ids` those `[tiers]` gives its
    purposes there. `/props` does not show `--cache-ram`: its absence is told by the first
    loss instead."""
    if not isinstance(props, dict):
        return []
    warnings = []
    total = props.get("total_slots")
    if type(total) is int and total > 0 and (past := sorted({i for i in slot_ids if i >= total})):
        warnings.append(
            f"[slots] ids {past} are past the server's {total} slot(s): it takes them modulo "
            f"{total}, so sessions of two logical slots share one and push each other out; "
            f"use ids below {total} or start llama-server with -np {max(past) + 1}"
        )
    if type(total) is int and total > 0 and (past := sorted({i for i in tier_ids if i >= total})):
        warnings.append(
            f"[tiers] slot ids {past} are past the server's {total} slot(s): it takes them "
            f"modulo {total}, so a tier's requests may land in a session's slot and push its "
            f"prompt out; use ids below {total} or start llama-server with -np {max(past) + 1}"
        )
    if props.get("is_sleeping") is True:
        warnings.append(
            "llama-server is asleep (--sleep-idle-seconds): each sleep drops every cached "
            "prompt, so each session's next turn processes its whole prompt; leave it off"
        )
    return warnings


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
