"""The sandbox row: what `shell` and `run_cell` cost through a real brokerd (issue 29).

A real `brokerd serve` (the broker row's, `broker._open_brokerd`) answers each call over its
socket through `BrokerPort`, as loopd calls it. Three series, each a median of wall time per
call with the CPU it took:

- `shell true`: a whole run (the cgroup made, `sh`, `prlimit`, `bwrap` and its namespaces,
  `bash -c true`, the run ended and its group removed): the sandbox's start cost;
- `run_cell 1 + 1` in a warm interpreter (one session, its interpreter started before);
- a cold interpreter: the first cell (`1 + 1`) of a new session each time, which starts the
  system's `python3` in a new sandbox.

CPU is that of brokerd's whole process tree (`tree_cpu`): brokerd's own user and system time,
its reaped children's, and each live descendant's (the interpreters); a process reaped by
its parent moves its time into the parent's, so the sum counts each tick once.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import attrs

from boxmaker.broker import Registry
from boxmaker.loop.broker_port import BrokerPort
from boxmaker.proto import ResultResponse, SessionId, ToolRequest

from .broker import _clients, _open_brokerd
from .harness import BenchError
from .report import Row
from .stats import spread

__all__ = ["run", "tree_cpu"]


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and every process below it, with their reaped children's."""
    parents: dict[int, int] = {}
    spent: dict[int, int] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(name)] = int(fields[1])
        spent[int(name)] = sum(int(field) for field in fields[11:15])  # utime to cstime
    tree, grew = {pid}, True
    while grew:
        below = {child for child, parent in parents.items() if parent in tree} - tree
        grew = bool(below)
        tree |= below
    return sum(spent.get(member, 0) for member in tree) / os.sysconf("SC_CLK_TCK")


SHELL = '{"command": "true"}'
CELL = '{"code": "1 + 1"}'


async def run(root: Path, *, calls: int, cold: int) -> Row:
    with _open_brokerd(root) as (brokerd, config_path):
        inside, port = _clients(config_path)
        series = _Series(port, brokerd.popen.pid, inside.registry)
        await series.timed("shell", SHELL, ["bench-probe"])  # the first run pays the imports
        shell = await series.timed("shell", SHELL, ["bench-shell"] * calls)
        await series.timed("run_cell", CELL, ["bench-warm"])  # its interpreter started
        warm = await series.timed("run_cell", CELL, ["bench-warm"] * calls)
        fresh = await series.timed("run_cell", CELL, [f"bench-cold-{n}" for n in range(cold)])
        if brokerd.popen.poll() is not None:
            raise BenchError(f"brokerd ended during the row:\n{brokerd.err.text()}")
    return _row({"`shell true`": shell, "`run_cell 1 + 1`, warm": warm,
                 "a cold interpreter (first cell of a session)": fresh}, calls, cold)  # fmt: skip


class _Series:
    def __init__(self, port: BrokerPort, pid: int, registry: Registry) -> None:
        self.port, self.pid, self.registry = port, pid, registry
        self.numbers = iter(range(1, 10**9))

    async def timed(self, tool: str, arguments: str, sessions: list[str]) -> Measured:
        """One call of `tool` in each of `sessions`: ms each, and the tree's CPU ms per call."""
        entry = self.registry.get(tool)
        if entry is None:
            raise BenchError(f"brokerd's registry has no {tool}")
        times, before = [], tree_cpu(self.pid)
        for session in sessions:
            request = ToolRequest(SessionId(session), next(self.numbers), tool, arguments,
                                  entry.definition)  # fmt: skip
            start = time.perf_counter()
            answer = await self.port.call(request)
            times.append((time.perf_counter() - start) * 1000)
            text = answer.content if isinstance(answer, ResultResponse) else ""
            if not ("[exit 0 · " in text if tool == "shell" else text.endswith("2")):
                raise BenchError(f"{tool} {arguments} answered {answer}")
        return Measured(times, (tree_cpu(self.pid) - before) * 1000 / len(sessions))


@attrs.frozen
class Measured:
    ms: list[float]
    cpu_ms: float


def _row(measured: dict[str, Measured], calls: int, cold: int) -> Row:
    lines = [f"| {name} | {spread(m.ms).show()} | {m.cpu_ms:.1f} |" for name, m in measured.items()]
    shell, warm, fresh = (statistics.median(m.ms) for m in measured.values())
    details = (
        f"{calls} calls of each warm series and {cold} cold starts, each through `BrokerPort` "
        "to a real `brokerd serve` (a connection per call, as loopd makes) with the shipped "
        "policy and the default `[sandbox]` limits.",
        "",
        "| call | wall time per call (ms) | CPU per call, brokerd's whole tree (ms) |",
        "|---|---|---|",
        *lines,
        "",
        "CPU is brokerd's user and system time with that of every process below it (its runs "
        "and interpreters, live or reaped: `/proc/<pid>/stat`, in clock ticks of 10 ms), over "
        "a series, divided by its calls.",
    )
    return Row(
        figure="sandbox: shell and run_cell through brokerd",
        result=f"`shell true` {shell:.1f} ms, warm `run_cell 1 + 1` {warm:.1f} ms, a cold "
        f"interpreter {fresh:.1f} ms (medians)",
        bar="reported (no bar in SPEC section 12)",
        met=True,
        details=details,
    )
