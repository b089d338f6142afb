"""Asking the homeserver again: a call that could not reach it, or that it answered with 5xx
or 429, is made again after a wait that doubles up to 60 s, with jitter (a 429's own wait
when it gave one). Every call the gateway makes may be made again: a post's key makes it
once."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from .matrix import Unreachable

__all__ = ["MAX_WAIT_S", "patiently", "wait_of"]

log = logging.getLogger("gatewayd")

T = TypeVar("T")
MAX_WAIT_S = 60.0


def wait_of(
    attempt: int, error: Unreachable | None = None, rng: random.Random | None = None
) -> float:
    """The wait before try `attempt + 1`: the homeserver's `retry_after`, else 0.5 s doubled
    per try up to `MAX_WAIT_S`, less up to a quarter at random (many clients that lost the same
    server come back apart)."""
    if error is not None and error.retry_after is not None:
        return float(min(error.retry_after, MAX_WAIT_S * 10))
    base: float = min(0.5 * 2**attempt, MAX_WAIT_S)
    jitter: float = (rng or random).random()
    return base * (1 - 0.25 * jitter)


async def patiently(call: Callable[[], Awaitable[T]], what: str, tries: int | None = None) -> T:
    """`call()` until the homeserver takes it (at most `tries` times; None: until it does).

    Raises:
        Refused: the homeserver refused it (asking again would not help).
        Unreachable: the last of `tries` failed.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except Unreachable as error:
            attempt += 1
            if tries is not None and attempt >= tries:
                raise
            wait = wait_of(attempt - 1, error)
            log.warning("%s: %s; trying again in %.1f s", what, error, wait)
            await trio.sleep(wait)
