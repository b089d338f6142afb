"""Row 3, resume: read a session of 10², 10³, 10⁴, 10⁵ records back and build its next request.

SPEC section 12 judges resume per epoch (loopd reads the current epoch only, and an epoch holds
at most what the context holds): the bar is on an epoch that fills a 1M-token context, about
5 MB of log (`EPOCH_MB`), and 10⁵ records in one epoch are reported beside it.

Each measurement runs in a fresh process (`python -m bxdev.bench.resume HOME SESSION`), so
its peak memory (VmHWM) is that of one resume and nothing else. The sessions are made by
`sessions.write_session`.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import trio

from boxmaker.clock import SystemClock
from boxmaker.config import InferenceConfig
from boxmaker.loopd.infer import encode_request
from boxmaker.proto import ChatRequest, SessionId, UserMessage
from boxmaker.store import Store

from .harness import peak_rss_mb
from .report import Row
from .sessions import history, write_session
from .stats import growth_exponent, spread

__all__ = ["main", "measure", "run"]

BAR_SECONDS, BAR_MB, LINEAR = 1.0, 200.0, 1.15
EPOCH_MB = 5.0  # the log of an epoch that fills a 1M-token context


async def run(root: Path, *, sizes: tuple[int, ...], runs: int) -> Row:
    home = root / "home"
    results: dict[int, tuple[float, float, float, float]] = {}  # s, CPU s, peak MB, MB at start
    log_mb: dict[int, float] = {}
    for size in sizes:
        session = f"resume-{size}"
        records = list(itertools.islice(history(), size - 1))
        log_mb[size] = await write_session(home, session, records) / 1e6
        runs_of = [measure(home, session) for _ in range(runs)]
        results[size] = (
            spread([figures["seconds"] for figures in runs_of]).median,
            spread([figures["cpu"] for figures in runs_of]).median,
            max(figures["peak_mb"] for figures in runs_of),
            min(figures["start_mb"] for figures in runs_of),
        )
    largest = max(sizes)
    seconds, cpu, peak, _ = results[largest]
    # The epoch the bar is on: the smallest measured whose log is about 5 MB or more.
    full = min((s for s in sizes if log_mb[s] >= EPOCH_MB * 0.98), default=largest)
    epoch_seconds, epoch_cpu, epoch_peak, _ = results[full]
    # From 10³ records up: at 10² a resume is mostly fixed costs (starting a thread, opening
    # files), which say nothing of how it grows.
    fitted = [s for s in sizes if s >= 1_000]
    fitted = fitted if len(fitted) >= 2 else list(sizes)
    exponent = growth_exponent(fitted, [results[s][0] for s in fitted])
    details = [
        f"Each figure is the median of {runs} runs, each in a new process: `Store.resume` "
        "(read and parse every line, check the baseline), then the next request's body built "
        "and encoded. Peak memory is the process's VmHWM, Python itself included.",
        "",
        "| records | log (MB) | time (ms) | CPU (ms) | per record (µs) | peak memory (MB) "
        "| at start (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        s, c, p, start = results[size]
        details.append(
            f"| {size:,} | {log_mb[size]:.1f} | {s * 1000:,.1f} | {c * 1000:,.1f} "
            f"| {s / size * 1e6:.2f} | {p:.0f} | {start:.0f} |"
        )
    details += [
        "",
        f"Growth: time ∝ records^{exponent:.2f} from {min(fitted):,} records up "
        f"(1.00 is linear; the bar takes ≤ {LINEAR}).",
    ]
    met = exponent <= LINEAR and epoch_seconds <= BAR_SECONDS and epoch_peak <= BAR_MB
    return Row(
        figure="resume",
        result=f"{epoch_seconds * 1000:,.0f} ms ({epoch_cpu * 1000:,.0f} ms CPU) and "
        f"{epoch_peak:.0f} MB for a {log_mb[full]:.1f} MB epoch ({full:,} records); "
        f"{seconds * 1000:,.0f} ms ({cpu * 1000:,.0f} ms CPU) and {peak:.0f} MB at "
        f"{largest:,}; time ∝ records^{exponent:.2f}",
        bar=f"linear; ≤ {BAR_SECONDS:g} s and ≤ {BAR_MB:g} MB for an epoch that fills a "
        f"1M-token context (about {EPOCH_MB:g} MB of log)",
        met=met,
        details=tuple(details),
    )


def measure(home: Path, session: str) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-m", "bxdev.bench.resume", str(home), session],
        capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    figures: dict[str, float] = json.loads(result.stdout)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Child: resume one session and build its next request; print the figures as JSON."""
    args = sys.argv[1:] if argv is None else argv
    home, session = Path(args[0]), SessionId(args[1])
    start_mb = peak_rss_mb_self()

    async def resume() -> tuple[float, float]:
        store = Store(home, SystemClock())
        started, cpu = time.perf_counter(), time.process_time()
        opened = store.resume(session)
        messages = (*opened.request_messages(), UserMessage(content="And the next one?"))
        request = ChatRequest(slot="main", messages=messages, tools=opened.baseline.tools)
        body = encode_request(request, 0, InferenceConfig())
        elapsed = time.perf_counter() - started, time.process_time() - cpu
        opened.close()
        assert body
        return elapsed

    seconds, cpu = trio.run(resume)
    print(
        json.dumps(
            {"seconds": seconds, "cpu": cpu, "peak_mb": peak_rss_mb_self(), "start_mb": start_mb}
        )
    )
    return 0


def peak_rss_mb_self() -> float:
    return peak_rss_mb(os.getpid())


if __name__ == "__main__":
    sys.exit(main())
