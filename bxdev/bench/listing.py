"""Row 7, session listing: `bxctl sessions` over a thousand sessions, timed as a
person meets it: the whole command, Python's start included, run in a new process each time.

Each session is written as loopd writes it (`sessions.write_session`: a hash-chained log of
ten turns) with its `index.json`, which is all the listing reads.
"""

from __future__ import annotations

import compileall
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import trio

import boxmaker

from .harness import BIN, BenchError
from .report import Row
from .sessions import history, write_session
from .stats import spread

__all__ = ["run"]

BAR_SECONDS = 0.5
TURN = 7  # records a turn in `history()`


async def run(root: Path, *, sessions: int, runs: int) -> Row:
    home = root / "home"
    records = list(itertools.islice(history(), 10 * TURN))
    for number in range(sessions):
        await write_session(home, f"chat-{number:05d}", records, index=True)
    # As Python leaves the package after a first run; an environment that sets
    # PYTHONDONTWRITEBYTECODE (this one does) would otherwise compile it again at every start.
    compileall.compile_dir(Path(boxmaker.__file__).parent, quiet=1)
    seconds = await trio.to_thread.run_sync(_timed, home, sessions, runs)
    start = await trio.to_thread.run_sync(_python_start)
    median = spread(seconds).median
    details = (
        f"`bxctl sessions` over {sessions:,} sessions of ten turns each, the whole command in "
        f"a new process, median of {runs} runs: {median * 1000:,.0f} ms (min "
        f"{min(seconds) * 1000:,.0f}, max {max(seconds) * 1000:,.0f}). Of that, starting "
        f"Python and importing bxctl alone takes {start * 1000:,.0f} ms. The package's "
        "bytecode is compiled first, as a first run leaves it.",
    )
    return Row(
        figure="session listing",
        result=f"{median * 1000:,.0f} ms for {sessions:,} sessions",
        bar=f"≤ {BAR_SECONDS:g} s at 1,000 sessions",
        met=median <= BAR_SECONDS,
        details=details,
    )


def _timed(home: Path, sessions: int, runs: int) -> list[float]:
    """Seconds of each of `runs` runs of `bxctl sessions`, listing `sessions`."""
    env = {**os.environ, "BOXMAKER_HOME": str(home), "NO_COLOR": "1"}
    seconds = []
    for _ in range(runs):
        started = time.monotonic()
        listed = subprocess.run(
            [str(BIN / "bxctl"), "sessions"], env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        seconds.append(time.monotonic() - started)
        if listed.returncode != 0 or len(listed.stdout.splitlines()) != sessions + 1:
            raise BenchError(f"bxctl sessions failed: {listed.stderr}")
    return seconds


def _python_start() -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import boxmaker.cli.bxctl"], check=True, timeout=60)
    return time.monotonic() - started
