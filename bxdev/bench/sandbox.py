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

Beside them, what the walls of issue 40 cost, each piece alone in this process: under root the
switch to the sandbox's user (`setpriv`) and the stage of a run's folders in a mount namespace
of its own (`unshare`, `mount`, `stat`), against starting `/bin/true` straight; holding a run's
folders (the workspace alone, and with four roots inside it: two masked, two read-only and
pinned); and the set-uid sweep after each call, over a workspace of 1,000 and 10,000 files.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path, PurePosixPath

import attrs

from boxmaker.brokerd import Registry
from boxmaker.brokerd.files.roots import Root
from boxmaker.brokerd.sandbox.holding import hold, release
from boxmaker.brokerd.sandbox.launch import Tools, stage_script
from boxmaker.brokerd.sandbox.mounts import Access, Shown, plan
from boxmaker.brokerd.sandbox.ownership import sandbox_user, sweep_setuid
from boxmaker.brokerd.sandbox.probe import find_tools
from boxmaker.brokerd.sandbox.process_tree import cpu_seconds
from boxmaker.proto import DataClass, ResultResponse, SessionId, ToolRequest
from boxmaker.serving.broker_port import BrokerPort

from .broker import _clients, _open_brokerd
from .harness import BenchError
from .report import Row
from .stats import spread

__all__ = ["run", "tree_cpu"]


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and every process below it, with their reaped children's."""
    return cpu_seconds(pid)


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
    walls = _walls(root / "walls", calls)
    measured = {"`shell true`": shell, "`run_cell 1 + 1`, warm": warm,
                "a cold interpreter (first cell of a session)": fresh}  # fmt: skip
    return _row(measured, calls, cold, walls)


def _walls(root: Path, calls: int) -> list[str]:
    """The walls' pieces, each timed alone (medians, ms)."""
    workspace = root / "ws"
    for name in ("v1", "v2", "r1", "r2"):
        (workspace / "in" / name).mkdir(parents=True)
    user = sandbox_user("") if os.geteuid() == 0 else None
    rows = []
    straight = _times(["/bin/true"], calls)
    if isinstance(user, tuple):
        setpriv = shutil.which("setpriv") or "setpriv"
        switch = [setpriv, f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups",
                  "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all",
                  "--no-new-privs", "--", "/bin/true"]  # fmt: skip
        rows.append(("the switch to the sandbox's user (`setpriv`)", _times(switch, calls)))
        st = os.stat(workspace)
        tools = find_tools(True)
        assert isinstance(tools, Tools)
        script = stage_script(tools, "/mnt", [str(workspace)], [f"{st.st_dev}:{st.st_ino}"])
        unshare = [tools.unshare or "unshare", "--mount", "--propagation", "private", "--",
                   "/bin/sh", "-c", script, "sh", "/bin/true"]  # fmt: skip
        rows.append(("the stage of the workspace (`unshare`, `mount`, `stat`)",
                     _times(unshare, calls)))  # fmt: skip
    base = statistics.median(straight)
    lines = [f"| {name} | {spread(ms).show()} | +{statistics.median(ms) - base:.2f} |"
             for name, ms in rows]  # fmt: skip
    roots = [_root(workspace, "workspace", True)]
    alone = _held(roots, calls)
    roots += [_root(workspace / "in" / n, n, n.startswith("r")) for n in ("v1", "v2", "r1", "r2")]
    nested = _held(roots, calls)
    lines.append(f"| holding the workspace | {spread(alone).show()} | |")
    lines.append(f"| holding it and four roots inside it | {spread(nested).show()} | |")
    for files in (1_000, 10_000):
        tree = root / f"sweep-{files}"
        for n in range(files):
            folder = tree / f"d{n % 100}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{n}").write_text("x")
        swept = []
        for _try in range(5):
            start = time.perf_counter()
            sweep_setuid(str(tree), os.geteuid(), private=False)
            swept.append((time.perf_counter() - start) * 1000)
        lines.append(f"| the set-uid sweep of {files:,} files in 100 folders | "
                     f"{spread(swept).show()} | |")  # fmt: skip
    return [
        "",
        f"What the walls cost, each piece alone ({'as root' if user else 'not root'}; ms):",
        "",
        "| piece | wall time (ms) | beyond starting `/bin/true` straight |",
        "|---|---|---|",
        f"| starting `/bin/true` straight | {spread(straight).show()} | |",
        *lines,
    ]


def _times(argv: list[str], calls: int) -> list[float]:
    times = []
    for _call in range(calls):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _root(path: Path, name: str, read: bool) -> Root:
    st = os.stat(path)
    return Root(name, PurePosixPath(path), read, name == "workspace", DataClass.PRIVATE,
                (st.st_dev, st.st_ino))  # fmt: skip


def _held(roots: list[Root], calls: int) -> list[float]:
    shown = [Shown(roots[0].path, "/workspace", Access.WRITE, roots[0].identity)]
    times = []
    for _call in range(calls):
        start = time.perf_counter()
        release(hold(plan(shown, roots), shown))
        times.append((time.perf_counter() - start) * 1000)
    return times


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


def _row(measured: dict[str, Measured], calls: int, cold: int, walls: list[str]) -> Row:
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
        *walls,
    )
    return Row(
        figure="sandbox: shell and run_cell through brokerd",
        result=f"`shell true` {shell:.1f} ms, warm `run_cell 1 + 1` {warm:.1f} ms, a cold "
        f"interpreter {fresh:.1f} ms (medians)",
        bar="reported (no bar in SPEC section 12)",
        met=True,
        details=details,
    )
