"""`cache_outcome`: did the server's prompt cache hold between two completions of a session?

The previous prompt is a prefix of the new one (every request extends the one before), so the
server should reuse at least all of it: `expected = previous.cache_n + previous.prompt_n`.
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


def cache_outcome(previous: Timings, new: Timings) -> CacheOutcome:
    """`Loss(expected, got)` when the server reused fewer tokens than the previous prompt had."""
    expected = previous.cache_n + previous.prompt_n
    got = new.cache_n
    return Loss(expected=expected, got=got) if got < expected else Hit()
