"""Why the server lost a session's prefix: the `cause` of a `cache_loss` (issue 21). Pure.

A loss is decided from what loopd knows, in this order, the first that holds:

1. `prefix_changed`: this request is not an extension of the one before (compared as JSON
   values, message by message). That must never happen: it names a bug of ours (or a
   template's); the detail names the first message that differs and the byte offset in it.
2. `server_restarted`: the server's start identity changed since the session's previous
   completion (`/props`: `media_marker` is drawn at random by each server process; a new
   `build_info` or `model_path` also means a new process). The detail names what changed.
3. `slot_taken`: another session (or another client) used the slot since.
4. `evicted`: none of those, so the server's own caches let the prefix go (`--cache-ram` full
   or off, the idle slot cleared).

The watch that gathers these facts (`/props`, who used which slot) is the daemon's
(`daemon/slot_cache.py`); the turn asks it through `LossWatch`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from attrs import frozen

from ..proto import ChatMessage, LossCause, encode, unstructure

__all__ = [
    "LossWatch",
    "PrefixChange",
    "ServerIdentity",
    "explain_loss",
    "first_difference",
    "identity_of",
    "settings_warnings",
]

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


@frozen
class PrefixChange:
    """The first message of the previous request that this one does not repeat byte for byte
    (`message` counts from 0, the system message), and the byte offset of the first difference
    in its JSON."""

    message: int
    offset: int


def first_difference(
    before: Sequence[ChatMessage], after: Sequence[ChatMessage]
) -> PrefixChange | None:
    """None when `after` starts with every message of `before`, compared as JSON bytes."""
    for index, old in enumerate(before):
        if index >= len(after):
            return PrefixChange(message=index, offset=0)
        a, b = encode(unstructure(old)), encode(unstructure(after[index]))
        if a != b:
            offset = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
            return PrefixChange(
                message=index, offset=min(len(a), len(b)) if offset is None else offset
            )
    return None


def explain_loss(
    change: PrefixChange | None,
    restart: str | None,
    taken_by: str | None,
) -> tuple[LossCause, str]:
    """The cause of a loss and what told it.

    Args:
        change: the first difference between the previous request and this one, if any.
        restart: what said the server restarted since the previous completion (None: it did
            not, or loopd could not tell).
        taken_by: who used the slot since the session's previous request (None: nobody).
    """
    if change is not None:
        return LossCause.PREFIX_CHANGED, (
            f"message {change.message} differs from the previous request at byte "
            f"{change.offset}: a bug in loopd or the chat template"
        )
    if restart is not None:
        return LossCause.SERVER_RESTARTED, f"the server restarted: {restart}"
    if taken_by is not None:
        return LossCause.SLOT_TAKEN, f"{taken_by} used the slot since"
    return LossCause.EVICTED, "the server's prompt cache let the prefix go"


def settings_warnings(props: Any, slot_ids: Iterable[int]) -> list[str]:
    """What the server's settings in `/props` say will lose sessions' prefixes, in words.
    `/props` does not show `--cache-ram`: its absence is told by the first loss instead."""
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
    if props.get("is_sleeping") is True:
        warnings.append(
            "llama-server is asleep (--sleep-idle-seconds): each sleep drops every cached "
            "prompt, so each session's next turn processes its whole prompt; leave it off"
        )
    return warnings


class LossWatch(Protocol):
    """What the daemon saw of the server and its slots (`daemon/slot_cache.py`)."""

    async def before_request(
        self, session: str, slot: str, messages: Sequence[ChatMessage]
    ) -> str | None:
        """Called holding the slot's gate, before a request of `session` goes out: what told
        a server restart since the session's previous request, when the server therefore no
        longer holds its prefix (None: no restart known, or the prefix was restored)."""
        ...

    async def after_loss(self, session: str, slot: str) -> tuple[str | None, str | None]:
        """After a loss: what said the server restarted since the session's previous
        completion, and who took its slot since; each None when nothing did."""
        ...
