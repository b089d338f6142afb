"""Row 2, event throughput: content deltas forwarded from the server to a channel client.

The fake streams one long completion with no pause between tokens, so the figure is how fast
loopd takes chunks in and writes `content` frames out: events counted by the client, from the
first content frame to the last. Beside it, the same completion streamed straight from the fake
gives the most the fake itself can send, the ceiling of what loopd could forward here; loopd's
CPU time per event says how far it is from its own limit.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from boxmaker.config import load_config
from boxmaker.loopd.infer import encode_request
from boxmaker.proto import ChatRequest, SystemMessage, UserMessage
from boxmaker.store import core_only, read_baseline

from .harness import (
    BenchError,
    TurnTimes,
    cpu_seconds,
    direct_completion,
    open_stack,
    timed_turn,
    turn_frame,
)
from .report import Row
from .stats import spread

__all__ = ["run"]

BAR = 20_000.0
QUESTION = "Tell me a long story."


async def run(root: Path, *, tokens: int, runs: int) -> Row:
    reply = " ".join(f"w{i}" for i in range(tokens))
    config = f"[inference]\nmax_tokens = {tokens + 16}\n"
    fake_args = ("--reply", reply, "--n-ctx", str(tokens + 4096))
    loop_rates: list[float] = []
    direct_rates: list[float] = []
    cpu_per_event: list[float] = []
    with open_stack(root, *fake_args, config=config) as stack:
        loaded = load_config(root / "config.toml")
        baseline = read_baseline(loaded.baseline.system, core_only(loaded.paths.home)())
        messages = (SystemMessage(content=baseline.system), UserMessage(content=QUESTION))
        request = ChatRequest(slot="main", messages=messages, tools=baseline.tools)
        body = encode_request(request, loaded.slots["main"], loaded.inference)
        async with httpx.AsyncClient(base_url=stack.url, timeout=600) as http:
            for i in range(runs + 1):  # the first of each is a warm-up
                before = cpu_seconds(stack.loopd.pid)
                frame = turn_frame(f"t{i}", QUESTION, resume=False)
                loop = await timed_turn(stack.loopd.socket, frame)
                used = cpu_seconds(stack.loopd.pid) - before
                direct = await direct_completion(http, body)
                for times in (loop, direct):
                    if times.events != tokens:
                        raise BenchError(f"expected {tokens} content events, got {times.events}")
                if i:
                    loop_rates.append(_rate(loop))
                    direct_rates.append(_rate(direct))
                    cpu_per_event.append(used / tokens * 1e6)
    through = spread(loop_rates)
    ceiling = spread(direct_rates)
    cpu = spread(cpu_per_event)
    details = (
        f"One completion of {tokens:,} content tokens, the fake sending with no pause; "
        f"{runs} runs after a warm-up, each a new session.",
        "",
        "| | content events/s |",
        "|---|---|",
        f"| through loopd to a channel client | {through.show(digits=0)} |",
        f"| straight from the fake (its ceiling) | {ceiling.show(digits=0)} |",
        "",
        f"loopd's CPU time per event (user and system, from `/proc`): "
        f"{cpu.show('µs', digits=1)}, so loopd alone could forward about "
        f"{1e6 / cpu.median:,.0f} events/s on one core; here the fake sets the pace.",
    )
    return Row(
        figure="event throughput",
        result=f"{through.median:,.0f} events/s (the fake alone sends {ceiling.median:,.0f}/s)",
        bar=f"≥ {BAR:,.0f} events/s",
        met=through.median >= BAR,
        details=details,
    )


def _rate(times: TurnTimes) -> float:
    return (times.events - 1) / (times.last - times.first)
