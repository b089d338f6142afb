"""A share of the sandbox's runs: `shell`, `run_cell` and the MCP servers' calls take one of
`[sandbox] concurrency` tokens (one `trio.CapacityLimiter`, brokerd's), waited for at most as
long as loopd's call timeout leaves room to run; a call that gets none is answered `busy`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import trio

from ...proto import FailedResponse

__all__ = ["busy", "slot"]


@contextlib.asynccontextmanager
async def slot(limiter: trio.CapacityLimiter, wait: float) -> AsyncIterator[bool]:
    """One of `limiter`'s tokens for the block, waited for at most `wait` seconds (a call
    must leave loopd's call timeout room to run); False when none came in time."""
    got = False
    with trio.move_on_after(wait):
        await limiter.acquire()
        got = True
    try:
        yield got
    finally:
        if got:
            limiter.release()


def busy(limiter: trio.CapacityLimiter, wait: float) -> FailedResponse:
    return FailedResponse(
        f"not run: all {limiter.total_tokens} of the sandbox's runs stayed "
        f"busy for {wait:g} s; try again later"
    )
