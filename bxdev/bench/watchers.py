"""Row: what watching costs loopd (issue 43): its CPU per content event with no watcher, one,
and four, each a `watch` connection of the session that reads every frame.

The fake streams one long completion with no pause between tokens, as in the throughput row;
each run is a new session, watched (or not) from before its turn frame, and the runs of the
three counts are interleaved so that a drift of the machine falls on all of them.
"""

from __future__ import annotations

from pathlib import Path

import trio

from .harness import BenchError, cpu_seconds, open_stack, open_watch, timed_turn, turn_frame
from .report import Row
from .stats import spread

__all__ = ["run"]

COUNTS = (0, 1, 4)
BAR_US = 10.0  # the CPU each watcher may add per event
QUESTION = "Tell me a long story."


async def _watch(
    socket: Path, session: str, tokens: int, ready: trio.Event, heard: trio.Event
) -> None:
    """One watcher: the watch in place (`ready`), then every byte read until loopd closes or
    the run's end cancels it; `heard` once all `tokens` content frames came."""
    stream, rest = await open_watch(socket, session)
    async with stream:
        ready.set()
        count = 0
        while chunk := await stream.receive_some(1 << 16):
            *lines, rest = (rest + chunk).split(b"\n")  # whole lines: a chunk cuts anywhere
            count += sum(b'"type":"content"' in line for line in lines)
            if count >= tokens:
                heard.set()


async def run(root: Path, *, tokens: int, runs: int) -> Row:
    reply = " ".join(f"w{i}" for i in range(tokens))
    config = f"[inference]\nmax_tokens = {tokens + 16}\n"
    fake_args = ("--reply", reply, "--n-ctx", str(tokens + 4096))
    per_event: dict[int, list[float]] = {n: [] for n in COUNTS}
    with open_stack(root, *fake_args, config=config) as stack:
        socket = stack.loopd.socket
        for i in range(runs + 1):  # the first round is a warm-up
            for n in COUNTS:
                session = f"w{n}-{i}"
                async with trio.open_nursery() as nursery:
                    heard = [trio.Event() for _ in range(n)]
                    for done in heard:
                        ready = trio.Event()
                        nursery.start_soon(_watch, socket, session, tokens, ready, done)
                        await ready.wait()
                    before = cpu_seconds(stack.loopd.pid)
                    times = await timed_turn(socket, turn_frame(session, QUESTION, resume=False))
                    with trio.fail_after(60):
                        for done in heard:
                            await done.wait()
                    used = cpu_seconds(stack.loopd.pid) - before
                    nursery.cancel_scope.cancel()
                if times.events != tokens:
                    raise BenchError(f"expected {tokens} content events, got {times.events}")
                if i:
                    per_event[n].append(used / tokens * 1e6)
    cpu = {n: spread(values) for n, values in per_event.items()}
    first = cpu[1].median - cpu[0].median
    further = (cpu[4].median - cpu[1].median) / 3
    details = (
        f"One completion of {tokens:,} content tokens, the fake sending with no pause; "
        f"{runs} runs of each count after a warm-up, interleaved, each a new session.",
        "",
        "| watchers | loopd's CPU per content event (µs) |",
        "|---|---|",
        *(f"| {n} | {cpu[n].show('µs', digits=1)} |" for n in COUNTS),
        "",
        f"The first watcher adds {first:.1f} µs per event (the envelope, and the event encoded "
        f"once more), each further one {further:.1f} µs (the same bytes queued on its "
        "connection, and written).",
    )
    return Row(
        figure="watchers",
        result=f"{cpu[0].median:.1f} / {cpu[1].median:.1f} / {cpu[4].median:.1f} µs CPU per "
        "event with 0 / 1 / 4 watchers",
        bar=f"≤ {BAR_US:g} µs per event per watcher",
        met=first <= BAR_US,
        details=details,
    )
