"""Row `pace`: the loop at a device's pace (issue 49). A GPU server sends a token every 5 to
20 ms, so each token reaches loopd alone and what loopd spends on it is its whole cost there.

The overhead row's completion (64 content tokens, the second turn of a session), the fake
pausing 5 ms and then 20 ms before each token: loopd's CPU per token (its event loop's thread)
and the share of one core it keeps busy over the completion, beside a minimal httpx client
streaming the same completion straight from the fake (its CPU, in this process's thread).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from .harness import (
    BenchError,
    direct_completion,
    loop_cpu_seconds,
    open_stack,
    timed_turn,
    turn_frame,
)
from .report import Row
from .stats import Spread, spread

__all__ = ["PACES_MS", "run"]

TOKENS = 64
PACES_MS = (5.0, 20.0)
BODY = b'{"messages":[{"role":"user","content":"Hello."}],"stream":true}'


async def run(root: Path, *, runs: int) -> Row:
    lines = [
        f"{TOKENS} content tokens per completion, {runs} completions at each pace (the second "
        "turn of a session through loopd; the direct client alternating with it). loopd's CPU "
        "per token is the whole turn's over 64: its once-a-turn work (the request, the log, "
        "the final frame) included, as it is on a device.",
        "",
        "| pace | loopd: CPU per token | loopd: share of a core | direct client: CPU per "
        "token | direct: share of a core |",
        "|---|---|---|---|---|",
    ]
    shares = []
    for ms in PACES_MS:
        loop_cpu, loop_wall, direct_cpu, direct_wall = await _pace(root / f"{ms:g}ms", ms, runs)
        share = loop_cpu.median / loop_wall.median
        shares.append(share)
        lines.append(
            f"| {ms:g} ms a token | {loop_cpu.median / TOKENS * 1e6:.0f} µs | {share:.2%} | "
            f"{direct_cpu.median / TOKENS * 1e6:.0f} µs | "
            f"{direct_cpu.median / direct_wall.median:.2%} |"
        )
    return Row(
        figure="the loop at a device's pace",
        result=", ".join(
            f"{share:.2%} of a core at {ms:g} ms a token"
            for ms, share in zip(PACES_MS, shares, strict=True)
        ),
        bar="reported (no bar)",
        met=True,
        details=tuple(lines),
    )


async def _pace(root: Path, ms: float, runs: int) -> tuple[Spread, Spread, Spread, Spread]:
    reply = " ".join(f"w{i}" for i in range(TOKENS))
    loop_cpu: list[float] = []
    loop_wall: list[float] = []
    direct_cpu: list[float] = []
    direct_wall: list[float] = []
    with open_stack(root, "--reply", reply, "--ms-per-token", str(ms)) as stack:
        async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
            for i in range(runs + 1):  # the first is a warm-up
                await timed_turn(stack.loopd.socket, turn_frame(f"d-{i}", "Hi.", resume=False))
                before = loop_cpu_seconds(stack.loopd.pid)
                loop = await timed_turn(
                    stack.loopd.socket, turn_frame(f"d-{i}", "Again?", resume=True)
                )
                cpu = loop_cpu_seconds(stack.loopd.pid) - before
                start = time.thread_time()
                direct = await direct_completion(http, BODY)
                used = time.thread_time() - start
                if loop.events != TOKENS or direct.events != TOKENS:
                    raise BenchError(f"expected {TOKENS} tokens: {loop}, {direct}")
                if i:
                    loop_cpu.append(cpu)
                    loop_wall.append(loop.total)
                    direct_cpu.append(used)
                    direct_wall.append(direct.total)
    return spread(loop_cpu), spread(loop_wall), spread(direct_cpu), spread(direct_wall)
