"""`cache_outcome`: did the server's prompt cache hold between two completions of a session?

The previous prompt is a prefix of the new one (every request extends the one before), so the
server should reuse at least all of it: `expected = previous.cache_n + previous.prompt_n`.
A server that caches in blocks (vLLM: 16 tokens) reuses whole blocks only, so up to a block
less than that is still a hit; one that reports no cache figure (`block` 0) is never judged.
Pure.
"""

from __future__ import annotations

from attrs import frozen

from ..proto import Timings

__all__ = ["CacheOutcome", "Hit", "Loss", "cache_outcome"]


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
