"""Row 4, request building: what it costs to build and encode the request for completion 10 of
a session, for completion 100 and for completion 1,000, against the size of each body.

Each session is resumed once; then the request is built as a turn builds it (the session's
messages, the `ChatRequest`, `encode_request`) many times and the median taken. While it is
timed the log file is moved away, so a build that read the log would fail: it never does.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from boxmaker.clock import SystemClock
from boxmaker.config import InferenceConfig
from boxmaker.loopd.infer import encode_request
from boxmaker.proto import ChatRequest, SessionId
from boxmaker.store import OpenSession, Store

from .report import Row
from .sessions import until_completion, write_session
from .stats import growth_exponent, spread

__all__ = ["run"]

PROPORTIONAL = 1.15  # the most the growth exponent of cost over body size may be


async def run(root: Path, completions: tuple[int, ...]) -> Row:
    home = root / "home"
    store = Store(home, SystemClock())
    figures: dict[int, tuple[float, int, float, float]] = {}  # seconds, bytes, min, max
    for number in completions:
        name = f"building-{number}"
        await write_session(home, name, until_completion(number))
        session = store.resume(SessionId(name))
        moved = session.log_path.with_suffix(".moved")
        os.rename(session.log_path, moved)
        try:
            times, size = _time_builds(session, repeats=max(20, 20_000 // number))
        finally:
            os.rename(moved, session.log_path)
            session.close()
        cost = spread(times)
        figures[number] = (cost.median, size, cost.low, cost.high)
    sizes = [figures[n][1] for n in completions]
    costs = [figures[n][0] for n in completions]
    exponent = growth_exponent(sizes, costs)
    first, last = completions[0], completions[-1]
    details = [
        "The request for completion *n* of a session with tool calls: the session's messages, "
        "the `ChatRequest` and `encode_request`, as a turn builds it; the median of many "
        "builds, with the log file moved away meanwhile (nothing reads it).",
        "",
        "| completion | body (kB) | build and encode (µs) | min-max (µs) | per kB (µs) |",
        "|---|---|---|---|---|",
    ]
    for number in completions:
        seconds, size, low, high = figures[number]
        details.append(
            f"| {number:,} | {size / 1000:,.1f} | {seconds * 1e6:,.0f} "
            f"| {low * 1e6:,.0f}-{high * 1e6:,.0f} | {seconds * 1e6 / (size / 1000):.2f} |"
        )
    details += [
        "",
        f"Growth: cost ∝ body size^{exponent:.2f} (1.00 is proportional; the bar takes "
        f"≤ {PROPORTIONAL}).",
    ]
    ratio = figures[last][0] / figures[first][0]
    size_ratio = figures[last][1] / figures[first][1]
    return Row(
        figure="request building",
        result=f"completion {last:,} costs {ratio:.0f} times completion {first:,} for a body "
        f"{size_ratio:.0f} times as large (cost ∝ size^{exponent:.2f})",
        bar="proportional to the body size only (no re-reading the log)",
        met=exponent <= PROPORTIONAL,
        details=tuple(details),
    )


def _time_builds(session: OpenSession, *, repeats: int) -> tuple[list[float], int]:
    inference = InferenceConfig()
    times = []
    body = b""
    for _ in range(repeats):
        started = time.perf_counter()
        request = ChatRequest(
            slot=session.slot,
            messages=session.request_messages(),
            tools=session.baseline.tools,
        )
        body = encode_request(request, 0, inference)
        times.append(time.perf_counter() - started)
    return times, len(body)
