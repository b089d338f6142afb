"""The mcp row: a call through brokerd to an MCP server (issue 30).

A real `brokerd serve` (the broker row's `_open_brokerd`) runs the published `mcp-server-time`
(the test extra's, in the sandbox where this machine has one, as brokerd runs a server by
default), its tools allowed by `[mcp.time] trust_hints` (they say they only read). Each call
goes through `BrokerPort`, as loopd sends a `call_tool`: a connection, one frame each way,
brokerd's checks, then a `tools/call` on the server's stdio and its answer read back. Beside
it, `clock` through the same brokerd: the difference is the MCP hop. Also: how long brokerd
took from its start to the server's tools in its registry, and the CPU per call of brokerd's
whole tree (brokerd, the sandbox and the server: `sandbox.tree_cpu`).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from boxmaker.brokerd import SHIPPED_POLICY
from boxmaker.proto import ResultResponse, SessionId, ToolRequest

from .broker import _clients, _open_brokerd
from .harness import BenchError
from .report import Row
from .sandbox import tree_cpu
from .stats import spread

__all__ = ["run"]

PYTHON = Path(sys.executable)
READ = sorted({str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)})
CONFIG = f"""\
[mcp.time]
command = {json.dumps([str(PYTHON), "-m", "mcp_server_time", "--local-timezone", "UTC"])}
read = {json.dumps(READ)}
"""
POLICY = SHIPPED_POLICY + "\n[mcp.time]\ntrust_hints = true\n"
SESSION = SessionId("bench-mcp")


async def run(root: Path, *, calls: int) -> Row:
    started = time.monotonic()
    with _open_brokerd(root, CONFIG, POLICY) as (brokerd, config_path):
        try:
            line = brokerd.err.wait_for("mcp time: ready")
        except AssertionError as exc:
            raise BenchError(f"the time server did not start:\n{brokerd.err.text()}") from exc
        ready_ms = (time.monotonic() - started) * 1000
        _inside, port = _clients(config_path)
        numbers = iter(range(1, 10**9))
        measured: dict[str, tuple[list[float], float]] = {}
        for name, tool, arguments in (
            ("`clock` (brokerd's own)", "clock", "{}"),
            ("`time.get_current_time` (MCP)", "time.get_current_time", '{"timezone": "UTC"}'),
            ("`time.convert_time` (MCP)", "time.convert_time",
             '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'),
        ):  # fmt: skip
            for _warm in range(3):
                await port.call(ToolRequest(SESSION, next(numbers), tool, arguments))
            times, before = [], tree_cpu(brokerd.popen.pid)
            for _call in range(calls):
                request = ToolRequest(SESSION, next(numbers), tool, arguments)
                start = time.perf_counter()
                answer = await port.call(request)
                times.append((time.perf_counter() - start) * 1000)
                if not isinstance(answer, ResultResponse):
                    raise BenchError(f"{tool} answered {answer}")
            cpu = (tree_cpu(brokerd.popen.pid) - before) * 1000 / calls
            measured[name] = (times, cpu)
        if brokerd.popen.poll() is not None:
            raise BenchError(f"brokerd ended during the row:\n{brokerd.err.text()}")
    where = line.split("(", 1)[-1].rstrip(")\n")
    return _row(measured, calls, ready_ms, where)


def _row(measured: dict[str, tuple[list[float], float]], calls: int, ready_ms: float,
         where: str) -> Row:  # fmt: skip
    lines = [
        f"| {name} | {spread(ms).show()} | {cpu:.1f} |" for name, (ms, cpu) in measured.items()
    ]
    clock, current, _convert = (statistics.median(ms) for ms, _cpu in measured.values())
    details = (
        f"{calls} calls of each, through `BrokerPort` to a real `brokerd serve` (a connection "
        "per call, as loopd makes), after three to warm up; the server `mcp-server-time` "
        f"(Python, the published one) {where}.",
        "",
        "| call | wall time per call (ms) | CPU per call, brokerd's whole tree (ms) |",
        "|---|---|---|",
        *lines,
        "",
        f"From brokerd's start to the server's tools in its registry: {ready_ms:.0f} ms (the "
        "self-test, the sandbox, Python's start and the SDK's imports, `initialize`, "
        "`tools/list`). CPU is that of brokerd and every process below it, in clock ticks of "
        "10 ms, over a series, divided by its calls.",
    )
    return Row(
        figure="mcp: a call through brokerd to an MCP server",
        result=f"`time.get_current_time` {current:.1f} ms against `clock` {clock:.1f} ms "
        f"(medians): the MCP hop adds {current - clock:.1f} ms",
        bar="reported (no bar in SPEC section 12)",
        met=True,
        details=details,
    )
