"""Row `profile`: where loopd's CPU goes per completion, at a real server's pace and back to
back, sampled by a real profiler (py-spy, which starts loopd, so it needs no ptrace rights).

The overhead row's completion (64 content tokens, the second turn of a session) runs `runs`
times at 1 ms before each token and `runs` times with no pause; each time the turns run
twice, once in a plain loopd (its event loop's CPU time per turn, from `/proc`) and once under
py-spy (which part of the code each sample of that thread was in). The CPU time is shared out
by the samples' parts (`part_of`), so a part's figure is its share of the plain run's time.
What a lone chunk costs more than one in a burst is the difference, over 64.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from .harness import (
    BIN,
    BenchError,
    loop_cpu_seconds,
    open_fake,
    open_loopd,
    open_stack,
    timed_turn,
    turn_frame,
)
from .report import Row

__all__ = ["PARTS", "part_of", "run", "shares"]

TOKENS = 64
LONG = 4000  # tokens of the completion that gives the CPU per event back to back
RATE = 1000  # samples a second
FIRST, SECOND, THIRD = "Hello there.", "And again?", "Once more?"
BAR_MS = 5.0  # the issue's: CPU per completion at 1 ms a token, less 64 events back to back

# The parts of a turn, each named by the frames that are its own, looked for from the
# innermost frame out: the first frame that names one decides.
_OWN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("socket write", ("loopd/outbox.py",)),
    ("frame encode", ("channel/codec.py", "proto/_converter.py", "proto/_fast.py", "cattrs/")),
    ("repetition watch", ("loop/repetition.py",)),
    ("SSE decode", ("infer/sse.py",)),
    ("fold", ("infer/stream.py", "proto/_json.py", "infer/thinking.py")),
    ("forward (the words shown, the tally)", ("loop/ask.py", "loop/words.py", "loopd/held.py")),
    ("HTTP read", ("httpx/", "httpcore/", "h11/", "infer/_http.py", "trio/_socket.py")),
)
_TRIO = "trio/_core/"
_STREAM = ("reading.<locals>.read", "drain (", "Outbox.write")  # a stack in the per-chunk path
WAKE = "wake-up (trio's run loop, epoll)"
SWITCH = "task switches and checkpoints (trio)"
TURN = "the turn's own work (accept, request, log)"
THREADS = "worker threads (fsync)"
PARTS = (*(name for name, _ in _OWN), SWITCH, WAKE, TURN)


def part_of(stack: list[str]) -> str | None:
    """The part of a turn one sample (its frames, outermost first) was in; None for one
    outside trio's run (loopd starting or stopping)."""
    if stack and stack[0].startswith("Thread._bootstrap"):
        return THREADS
    loop = next((i for i, frame in enumerate(stack) if frame.startswith("unrolled_run ")), None)
    if loop is None:
        return None
    if not any(marker in frame for frame in stack for marker in _STREAM):
        in_task = any("boxmaker/" in frame for frame in stack[loop + 1 :])
        return TURN if in_task else WAKE
    for frame in reversed(stack):
        for name, files in _OWN:
            if any(f in frame for f in files):
                return name
        if _TRIO in frame:
            return SWITCH
    return TURN


def shares(raw: Iterable[str]) -> dict[str, float]:
    """The share of samples each part holds, of py-spy's raw (folded) output: a line a
    stack, frames joined with `;`, the count last. Worker threads' samples are left out."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and (part := part_of(stack.split(";"))) is not None:
            counts[part] += int(count)
    counts.pop(THREADS, None)
    total = sum(counts.values()) or 1
    return {name: counts[name] / total for name in PARTS}


async def run(root: Path, *, runs: int) -> Row:
    spy = BIN / "py-spy"
    if not spy.exists():
        raise BenchError(f"{spy} is missing: `make install` installs it (the dev extra)")
    paced = await _pace(root / "paced", spy, runs, ms_per_token=1.0)
    burst = await _pace(root / "burst", spy, runs, ms_per_token=0.0)
    per_event = await _per_event(root / "long")
    premium = paced[0] - burst[0]
    lines = [
        f"{TOKENS} content tokens per completion, {runs} completions at each pace; py-spy "
        f"sampling loopd {RATE} times a second; each part's CPU time is its share of the "
        "samples times the event loop's CPU time per turn in a plain loopd. A lone chunk's "
        "premium is the difference over 64. The turn's own work runs once a turn (sending the "
        "request, the log's writes and fsyncs, the final frame), yet costs more at the pace: "
        "each piece of it wakes another process, or runs with its caches cold.",
        "",
        "| part | at 1 ms a token (ms) | back to back (ms) | a lone chunk's premium (µs) |",
        "|---|---|---|---|",
    ]
    for name in PARTS:
        at_pace, at_burst = paced[0] * paced[1][name], burst[0] * burst[1][name]
        more = (
            f"{(at_pace - at_burst) * 1000:+.2f} ms a turn (once a turn, not a chunk)"
            if name == TURN
            else f"{(at_pace - at_burst) / TOKENS * 1e6:+.1f}"
        )
        lines.append(f"| {name} | {at_pace * 1000:.2f} | {at_burst * 1000:.2f} | {more} |")
    lines += [
        f"| **the whole turn** | **{paced[0] * 1000:.2f}** | **{burst[0] * 1000:.2f}** | "
        f"**{premium / TOKENS * 1e6:+.1f}** |",
        "",
        f"The bar's figure: {paced[0] * 1000:.2f} ms at 1 ms a token, less {TOKENS} times "
        f"{per_event * 1e6:.1f} µs, the event loop's CPU per content event of a {LONG}-token "
        "completion back to back.",
    ]
    figure = (paced[0] - TOKENS * per_event) * 1000
    return Row(
        figure="a completion at 1 ms a token",
        result=f"{figure:.2f} ms of loopd's CPU beyond its events' ({paced[0] * 1000:.2f} ms, "
        f"less {TOKENS} times {per_event * 1e6:.1f} µs); a lone chunk costs "
        f"{premium / TOKENS * 1e6:.0f} µs more than one in a burst",
        bar=f"≤ {BAR_MS:g} ms",
        met=figure <= BAR_MS,
        details=tuple(lines),
    )


async def _pace(
    root: Path, spy: Path, runs: int, *, ms_per_token: float
) -> tuple[float, dict[str, float]]:
    """At one pace: the event loop's CPU seconds per turn in a plain loopd, and the parts'
    shares of the samples under py-spy."""
    reply = " ".join(f"w{i}" for i in range(TOKENS))
    raw = root / "py-spy.txt"
    wrap = (str(spy), "record", "--rate", str(RATE), "--nonblocking", "--format", "raw",
            "--output", str(raw), "--")  # fmt: skip
    with open_fake(root, "--reply", reply, "--ms-per-token", str(ms_per_token)) as (_, url):
        with open_loopd(root, url) as loopd:
            for i in range(runs):
                await _turn(loopd.socket, f"p-{i}", FIRST, resume=False)
            before = loop_cpu_seconds(loopd.pid)
            for i in range(runs):
                await _turn(loopd.socket, f"p-{i}", SECOND, resume=True)
            cpu = (loop_cpu_seconds(loopd.pid) - before) / runs
        with open_loopd(root, url, wrap=wrap) as loopd:
            for i in range(runs):
                await _turn(loopd.socket, f"p-{i}", THIRD, resume=True)
            _stop_under(loopd.process)
    if not raw.exists():
        raise BenchError(f"py-spy wrote nothing; its log:\n{(root / 'loopd.log').read_text()}")
    with raw.open() as lines:
        return cpu, shares(lines)


async def _per_event(root: Path) -> float:
    """The event loop's CPU seconds per content event of one long completion back to back
    (as the throughput row measures it, on the event loop's thread)."""
    reply = " ".join(f"w{i}" for i in range(LONG))
    config = f"[inference]\nmax_tokens = {LONG + 16}\n"
    with open_stack(root, "--reply", reply, "--n-ctx", str(LONG + 4096), config=config) as stack:
        cpu = []
        for i in range(4):  # the first is a warm-up
            before = loop_cpu_seconds(stack.loopd.pid)
            times = await timed_turn(stack.loopd.socket, turn_frame(f"l-{i}", FIRST, resume=False))
            if times.events != LONG:
                raise BenchError(f"expected {LONG} content events, got {times.events}")
            cpu.append((loop_cpu_seconds(stack.loopd.pid) - before) / LONG)
    return min(cpu[1:])


async def _turn(socket: Path, session: str, content: str, *, resume: bool) -> None:
    times = await timed_turn(socket, turn_frame(session, content, resume=resume))
    if times.events != TOKENS:
        raise BenchError(f"expected {TOKENS} content events, got {times.events}")


def _stop_under(profiler: subprocess.Popen[bytes]) -> None:
    """Stop loopd, the profiler's child, and wait for the profiler to write its samples."""
    children = Path(f"/proc/{profiler.pid}/task/{profiler.pid}/children").read_text().split()
    if not children:
        raise BenchError("py-spy has no child: loopd did not start under it")
    os.kill(int(children[0]), signal.SIGTERM)
    try:
        profiler.wait(60)
    except subprocess.TimeoutExpired:
        print("py-spy did not finish within 60 s", file=sys.stderr)
        raise
