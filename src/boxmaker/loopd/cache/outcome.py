"""Did the server's prompt cache hold between two completions of a session, and if not, why.
Pure.

The previous prompt is a prefix of the new one (every request extends the one before), so the
server should reuse at least all of it: `expected = previous.cache_n + previous.prompt_n`
(`cache_outcome`). A server that caches in blocks (vLLM: 16 tokens) reuses whole blocks only,
so up to a block less than that is still a hit; one that reports no cache figure (`block` 0)
is never judged.

A loss's cause is decided from what loopd knows, in this order, the first that holds
(`explain_loss`):

1. `prefix_changed`: this request is not an extension of the one before (compared as JSON
   values, message by message, `first_difference`). That must never happen: it names a bug of
   ours (or a template's); the detail names the first message that differs and the byte offset
   in it.
2. `server_restarted`: the server's start identity changed since the session's previous
   completion (`infer.ServerIdentity`). The detail names what changed.
3. `slot_taken`: another session (or another client) used the slot since.
4. `evicted`: none of those, so the server's own caches let the prefix go (`--cache-ram` full
   or off, the idle slot cleared).

What the daemon saw of the server and its slots comes from the watch (`watch.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from ...proto import ChatMessage, LossCause, Timings, encode, unstructure

__all__ = [
    "CacheOutcome",
    "Hit",
    "Loss",
    "PrefixChange",
    "cache_outcome",
    "explain_loss",
    "first_difference",
]


@frozen
class Hit:
    pass


@frozen
class Loss:
    expected: int
    got: int


CacheOutcome = Hit | Loss


def cache_outcome(previous: Timings, new: Timings, block: int = 1) -> CacheOutcome:
    """`Loss(expected, got)` when the server reused fewer tokens than the previous prompt had
    (less than a whole `block` fewer is a hit; `block` 0: the server gave no figure)."""
    expected = previous.cache_n + previous.prompt_n
    got = new.cache_n
    return Loss(expected=expected, got=got) if block and got + block <= expected else Hit()


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
