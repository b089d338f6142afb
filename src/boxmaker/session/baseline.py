"""The baseline: the system text and the three core tool schemas every request starts with.

Assembled once, when a session is created, from `system.md` and (when it exists)
`<home>/memory/core.md`; written to `0.baseline.json` and read back from there on resume,
never from `system.md` again, so an edit to `system.md` only reaches new sessions and every
old request stays byte-identical. Nothing volatile is ever in it: no time, no date, no
counters, no session id. Pure; reading the two files is the caller's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from ..proto import Baseline, ToolSchema, dumps, loads
from ..tools.schemas import CORE_TOOLS
from .errors import BaselineTooLarge

__all__ = [
    "assemble_baseline",
    "baseline_bytes",
    "check_budget",
    "parse_baseline",
    "sha256_hex",
]


def assemble_baseline(
    system: str, core_memory: str | None, tools: tuple[ToolSchema, ...] = CORE_TOOLS
) -> Baseline:
    """`system.md`'s text, then a blank line and `memory/core.md`'s text if there is one."""
    text = system.rstrip("\n")
    if core_memory is not None and core_memory.strip():
        text += "\n\n" + core_memory.rstrip("\n")
    return Baseline(system=text, tools=tools)


def baseline_bytes(baseline: Baseline) -> bytes:
    """The bytes of `0.baseline.json`: compact JSON, then a newline."""
    return dumps(baseline) + b"\n"


def parse_baseline(data: bytes) -> Baseline:
    """Raises `proto.DecodeError` for bytes that are not a baseline."""
    return loads(Baseline, data)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def check_budget(
    baseline: Baseline, count_tokens: Callable[[Baseline], Awaitable[int]], max_tokens: int
) -> int:
    """Count the baseline's tokens with the server's tokenizer (`count_tokens`).

    Returns:
        The count.

    Raises:
        BaselineTooLarge: naming both numbers, when the count is over `max_tokens`.
    """
    tokens = await count_tokens(baseline)
    if tokens > max_tokens:
        raise BaselineTooLarge(tokens, max_tokens)
    return tokens
