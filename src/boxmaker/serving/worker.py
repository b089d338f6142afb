"""A blocking call from a daemon's event loop: in a worker thread, or, a test's choice, in the
event loop itself (trio's autojump clock leaps to the next deadline while a thread runs, so a
test that drives time keeps its file work in the loop)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import trio

__all__ = ["blocking"]

T = TypeVar("T")


async def blocking(work: Callable[..., T], *args: Any, threads: bool = True) -> T:
    """`work(*args)`, in a worker thread unless `threads` is false."""
    if not threads:
        return work(*args)
    return await trio.to_thread.run_sync(partial(work, *args))
