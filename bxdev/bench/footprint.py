"""Row `footprint`: what the daemons hold at rest and what a command a person runs often costs
to start (issue 49).

- brokerd's resident memory (VmRSS) once it listens, idle, with no MCP server configured, and
  with `mcp-server-time` configured once the server is ready (the mcp row's configuration);
- loopd's resident memory after `sessions` sessions of `turns` turns each (the fake sending a
  short answer back to back), at rest;
- `bxctl sessions` (in that home) and `bxctl --help`, wall clock, each a new process, and
  the modules `bxctl` imports that cost the most (`python -X importtime`, cumulative).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .broker import _open_brokerd
from .harness import BIN, BenchError, open_stack, timed_turn, turn_frame
from .mcp import CONFIG as MCP_CONFIG
from .mcp import POLICY as MCP_POLICY
from .report import Row

__all__ = ["importtimes", "run"]

BAR_BROKERD_MB, BAR_LOOPD_MB, BAR_START_MS = 30.0, 40.0, 150.0
STARTS = 10  # runs of each command
SHOWN = 12  # modules named in the import table


def rss_mb(pid: int) -> float:
    """A live process's resident memory now (VmRSS), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS for process {pid}")


def importtimes(stderr: str) -> list[tuple[str, int, int]]:
    """`python -X importtime`'s lines as (module, self µs, cumulative µs), in import order."""
    found = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        if own.strip().isdigit():
            found.append((name.strip(), int(own), int(cumulative)))
    return found


async def run(root: Path, *, sessions: int, turns: int) -> Row:
    with _open_brokerd(root / "brokerd") as (brokerd, _config):
        brokerd_mb = rss_mb(brokerd.popen.pid)
    with _open_brokerd(root / "brokerd-mcp", MCP_CONFIG, MCP_POLICY) as (brokerd, _config):
        brokerd.err.wait_for("mcp time: ready")
        brokerd_mcp_mb = rss_mb(brokerd.popen.pid)
    with open_stack(root / "loopd", "--reply", "Fine, thanks.") as stack:
        loopd_start_mb = rss_mb(stack.loopd.pid)
        for turn in range(turns):
            for i in range(sessions):
                frame = turn_frame(f"f-{i}", f"Message {turn}.", resume=turn > 0)
                await timed_turn(stack.loopd.socket, frame)
        loopd_mb = rss_mb(stack.loopd.pid)
        home = stack.loopd.home
    env = {**os.environ, "BOXMAKER_HOME": str(home)}
    listing = _wall_ms([str(BIN / "bxctl"), "sessions"], env)
    helping = _wall_ms([str(BIN / "bxctl"), "--help"], env)
    imports = _imports()
    lines = [
        f"brokerd, listening and idle: {brokerd_mb:.1f} MB with no MCP server, "
        f"{brokerd_mcp_mb:.1f} MB with `mcp-server-time` ready (brokerd alone, not the server).",
        f"loopd: {loopd_start_mb:.1f} MB listening, {loopd_mb:.1f} MB after {sessions} "
        f"sessions of {turns} turns.",
        f"`bxctl sessions` over those {sessions} sessions: {listing:.0f} ms; `bxctl --help`: "
        f"{helping:.0f} ms (medians of {STARTS} new processes, wall clock). A bare "
        f"`python -c pass` takes {_wall_ms([sys.executable, '-c', 'pass'], env):.0f} ms.",
        "",
        "What `import boxmaker.cli.bxctl` costs most (`-X importtime`, cumulative, median of "
        f"{STARTS}):",
        "",
        "| module | cumulative (ms) | its own (ms) |",
        "|---|---|---|",
        *(f"| `{name}` | {cumulative / 1000:.1f} | {own / 1000:.1f} |"
          for name, own, cumulative in imports),
    ]  # fmt: skip
    return Row(
        figure="footprint",
        result=f"brokerd {brokerd_mb:.1f} MB idle; loopd {loopd_mb:.1f} MB after "
        f"{sessions} x {turns} turns; `bxctl sessions` {listing:.0f} ms, `--help` {helping:.0f} ms",
        bar=f"brokerd ≤ {BAR_BROKERD_MB:g} MB, loopd ≤ {BAR_LOOPD_MB:g} MB, "
        f"each command ≤ {BAR_START_MS:g} ms",
        met=brokerd_mb <= BAR_BROKERD_MB
        and loopd_mb <= BAR_LOOPD_MB
        and max(listing, helping) <= BAR_START_MS,
        details=tuple(lines),
    )


def _wall_ms(args: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(STARTS + 1):  # the first warms the page cache
        start = time.perf_counter()
        done = subprocess.run(args, env=env, capture_output=True, timeout=60, check=False)
        times.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            raise BenchError(f"{args} failed: {done.stderr.decode(errors='replace')}")
    return statistics.median(times[1:])


def _imports() -> list[tuple[str, int, int]]:
    """The modules with the most cumulative import time under `bxctl`'s entry point, each its
    median over `STARTS` runs, the costliest first."""
    runs: dict[str, list[tuple[int, int]]] = {}
    for _ in range(STARTS):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import boxmaker.cli.bxctl"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        for name, own, cumulative in importtimes(done.stderr):
            runs.setdefault(name, []).append((own, cumulative))
    medians = [
        (name, int(statistics.median(o for o, _ in got)), int(statistics.median(c for _, c in got)))
        for name, got in runs.items()
    ]
    return sorted(medians, key=lambda entry: -entry[2])[:SHOWN]
