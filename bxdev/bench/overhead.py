"""Row 1, loop overhead: one completion through `loopd` and the channel, against the same
completion streamed straight from the same fake server by a minimal httpx client.

The fake runs on TCP with fixed timing (a set number of tokens, a set pause before each).
Each run is the second turn of a session made shortly before (loopd holds it open), so loopd
appends, builds the request from what it holds, and writes the answer durably before
`turn_done`. The direct client sends
the very body loopd sent (rebuilt from the session's log), on a kept-alive connection as loopd
uses. The two are interleaved, in alternating order, so drift on the machine hits both alike;
the overhead is the median of the paired differences.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import httpx

from boxmaker import layout
from boxmaker.config import Config, load_config
from boxmaker.loopd.infer import encode_request
from boxmaker.proto import ChatRequest, UserMessage
from boxmaker.session import parse_baseline, parse_log, request_messages, sha256_hex

from .harness import (
    BenchError,
    Stack,
    TurnTimes,
    direct_completion,
    loop_cpu_seconds,
    open_stack,
    session_log,
    timed_turn,
    turn_frame,
)
from .report import Row
from .stats import Spread, spread

__all__ = ["run"]

TOKENS = 64
FIRST, SECOND = "Hello there.", "And again?"
BAR_TOTAL_MS, BAR_FIRST_MS = 2.0, 1.0
BATCH = 32


async def run(root: Path, *, runs: int, warmup: int) -> Row:
    paced, paced_cpu = await _measure(root / "paced", runs=runs, warmup=warmup, ms_per_token=1.0)
    burst, burst_cpu = await _measure(root / "burst", runs=runs, warmup=warmup, ms_per_token=0.0)
    total, first = _added(paced)
    details = [
        f"{TOKENS} content tokens per completion; the second turn of a fresh session each run; "
        f"{runs} runs after {warmup} warm-up runs, loop and direct interleaved.",
        "",
        "| fake's pace | | through loopd (ms) | direct (ms) | added, median of pairs (ms) |",
        "|---|---|---|---|---|",
        *_lines("1 ms before each token", paced),
        *_lines("no pause (back to back)", burst),
        "",
        "The bar is read at 1 ms per token, a server at 1,000 tokens/s (faster than any local "
        "model here); back to back, every per-chunk cost of the loop adds up in the total "
        "instead of overlapping the server's own time, which the throughput row measures.",
        "",
        f"loopd's CPU time per completion (its event loop's thread, as the scheduler counts it; "
        f"a whole turn: accept, frame, {TOKENS} chunks in and frames out, the log's writes): "
        f"{paced_cpu * 1000:.2f} ms at 1 ms a token, {burst_cpu * 1000:.2f} ms back to back. "
        "It moves less than the wall clock with what else the machine runs, but it moves: on a "
        "virtual machine whose host is busy each instruction takes longer too.",
    ]
    return Row(
        figure="loop overhead",
        result=f"+{total.median:.2f} ms per completion, +{first.median:.2f} ms to first token; "
        f"loopd {paced_cpu * 1000:.2f} ms CPU per completion",
        bar=f"≤ {BAR_TOTAL_MS:g} ms added per completion, ≤ {BAR_FIRST_MS:g} ms to first token",
        met=total.median <= BAR_TOTAL_MS and first.median <= BAR_FIRST_MS,
        details=tuple(details),
    )


Pairs = list[tuple[TurnTimes, TurnTimes]]


def _added(pairs: Pairs) -> tuple[Spread, Spread]:
    total = spread([(loop.total - direct.total) * 1000 for loop, direct in pairs])
    first = spread([(loop.first - direct.first) * 1000 for loop, direct in pairs])
    return total, first


def _lines(pace: str, pairs: Pairs) -> list[str]:
    loop_total = spread([loop.total * 1000 for loop, _ in pairs])
    direct_total = spread([direct.total * 1000 for _, direct in pairs])
    loop_first = spread([loop.first * 1000 for loop, _ in pairs])
    direct_first = spread([direct.first * 1000 for _, direct in pairs])
    total, first = _added(pairs)
    return [
        f"| {pace} | whole completion | {loop_total.show()} | {direct_total.show()} | "
        f"**+{total.median:.2f}** (min {total.low:+.2f}, max {total.high:+.2f}) |",
        f"| | first content token | {loop_first.show()} | {direct_first.show()} | "
        f"**+{first.median:.2f}** (min {first.low:+.2f}, max {first.high:+.2f}) |",
    ]


async def _measure(
    root: Path, *, runs: int, warmup: int, ms_per_token: float
) -> tuple[Pairs, float]:
    """The timed pairs, and loopd's CPU seconds per timed turn (its warm-up turns left out:
    loopd does nothing but those turns while they run; the direct completions cost it none)."""
    reply = " ".join(f"w{i}" for i in range(TOKENS))
    pairs: Pairs = []
    cpu = 0.0
    with open_stack(root, "--reply", reply, "--ms-per-token", str(ms_per_token)) as stack:
        config = load_config(root / "config.toml")
        async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
            numbers = list(range(warmup + runs))
            # Sessions are made a batch ahead (fewer than loopd keeps open), so a timed turn
            # never follows the end of a first turn whose connection loopd is still closing.
            for start in range(0, len(numbers), BATCH):
                batch = numbers[start : start + BATCH]
                for i in batch:
                    frame = turn_frame(f"overhead-{i}", FIRST, resume=False)
                    await timed_turn(stack.loopd.socket, frame)
                for i in batch:
                    before = loop_cpu_seconds(stack.loopd.pid)
                    pair = await _pair(stack, http, config, f"overhead-{i}", loop_first=i % 2 == 0)
                    if i >= warmup:
                        pairs.append(pair)
                        cpu += loop_cpu_seconds(stack.loopd.pid) - before
    return pairs, cpu / max(len(pairs), 1)


async def _pair(
    stack: Stack, http: httpx.AsyncClient, config: Config, session: str, *, loop_first: bool
) -> tuple[TurnTimes, TurnTimes]:
    """The session's second turn through loopd, and its body straight from the fake."""
    body = _second_body(stack.loopd.home / "sessions" / session, config)
    second = turn_frame(session, SECOND, resume=True)
    if loop_first:
        loop = await timed_turn(stack.loopd.socket, second)
        direct = await direct_completion(http, body)
    else:
        direct = await direct_completion(http, body)
        loop = await timed_turn(stack.loopd.socket, second)
    if loop.events != TOKENS or direct.events != TOKENS:
        raise BenchError(f"expected {TOKENS} tokens: {loop}, {direct}")
    if session == "overhead-0":
        await _check_same_prompt(http, body, stack.loopd.home, session)
    return loop, direct


def _second_body(folder: Path, config: Config) -> bytes:
    """The body loopd sends for the second turn, rebuilt from the session's files."""
    baseline_data = (folder / layout.baseline_name(0)).read_bytes()
    log_file = folder / layout.log_name(0)
    log = parse_log(log_file.read_bytes(), log_file, sha256_hex(baseline_data))
    baseline = parse_baseline(baseline_data)
    messages = (*request_messages(baseline, log.records), UserMessage(content=SECOND))
    request = ChatRequest(slot="main", messages=messages, tools=baseline.tools)
    return encode_request(request, config.slots["main"], config.inference)


async def _check_same_prompt(
    http: httpx.AsyncClient, body: bytes, home: Path, session: str
) -> None:
    """The direct body renders to as many prompt tokens as loopd's request did."""
    response = await http.post("/v1/chat/completions", content=body)
    timings = [
        json.loads(line[len(b"data: ") :])["timings"]
        for line in response.content.splitlines()
        if line.startswith(b"data: {") and b'"timings"' in line
    ][-1]
    usage = [r for r in session_log(home, session) if r["type"] == "usage"][-1]
    direct = timings["cache_n"] + timings["prompt_n"]
    loop = cast(int, usage["cache_n"]) + cast(int, usage["prompt_n"])
    if direct != loop:
        raise BenchError(f"the direct body is {direct} prompt tokens, loopd's was {loop}")
