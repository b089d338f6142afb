"""The broker row: one tool call through brokerd against the same call in process (SPEC
section 14, issue 28).

A real `brokerd serve` runs in `root` (its home `root/home`, the shipped policy it writes
beside the config). Beside it, in this process, a `Broker` is built as brokerd builds its
own: the same config, registry, policy file, workspace and home. Each pair is one call
through `BrokerPort` (loopd's client: a connection, the socket's owner checked, one frame
each way) and the very same call on the in-process `Broker`, in alternating order, so drift
on the machine hits both alike; the difference is the socket, the frames and the hop to
another process. The added time is read from the paired differences (median and p90).

Two series: `clock` (brokerd answers on its event loop) and `read_file` of a small file of
the workspace (the file tools' path, with its hop to a worker thread). brokerd's CPU per call
is its user and system time (`/proc/<pid>/stat`, every thread) over a series' timed calls:
brokerd does nothing else meanwhile, the in-process calls cost it none.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

import attrs

from boxmaker.brokerd import Broker, builtin_registry, load_policy
from boxmaker.brokerd.selftest import protected_paths
from boxmaker.clock import SystemClock
from boxmaker.config import load_config
from boxmaker.proto import ResultResponse, SessionId, ToolRequest, ToolResponse
from boxmaker.serving.broker_port import BrokerPort

from ..processes import Process
from .harness import BenchError, cpu_seconds
from .report import Row
from .stats import p90, spread

__all__ = ["run"]

BIN = Path(sys.executable).parent
BAR_MS = 1.0
CALL_TIMEOUT_S = 30.0
SESSION = SessionId("bench-broker")
FILE = "notes.md"
FILE_TEXT = "".join(f"line {i}: a small file of the workspace\n" for i in range(1, 21))
# (the series' name, the tool, its arguments)
SERIES = (
    ("clock", "clock", "{}"),
    (f"read_file of {FILE} ({len(FILE_TEXT)} bytes)", "read_file", f'{{"path":"{FILE}"}}'),
)

Call = Callable[[ToolRequest], Awaitable[ToolResponse]]


@attrs.frozen
class Series:
    name: str
    through: list[float]  # ms, a call through brokerd
    inside: list[float]  # ms, the same call in process
    cpu_ms: float  # brokerd's CPU per call through it

    @property
    def added(self) -> list[float]:
        return [a - b for a, b in zip(self.through, self.inside, strict=True)]


async def run(root: Path, *, calls: int, warmup: int) -> Row:
    with _open_brokerd(root) as (brokerd, config_path):
        inside, port = _clients(config_path)
        started = time.monotonic()
        measured = []
        for name, tool, arguments in SERIES:
            entry = inside.registry.get(tool)
            if entry is None:
                raise BenchError(f"brokerd's registry has no {tool}")
            requests = [
                ToolRequest(SESSION, i, tool, arguments, entry.definition)
                for i in range(warmup + calls)
            ]
            measured.append(
                await _series(name, requests, warmup, port.call, inside.call, brokerd.popen.pid)
            )
        seconds = time.monotonic() - started
        if brokerd.popen.poll() is not None:
            raise BenchError(f"brokerd ended during the row:\n{brokerd.err.text()}")
    return _row(measured, calls=calls, warmup=warmup, seconds=seconds)


@contextmanager
def _open_brokerd(
    root: Path, config: str = "", policy: str | None = None
) -> Iterator[tuple[Process, Path]]:
    """`brokerd serve` in `root` (its home `root/home`; `config` added to its config file, and
    its policy `policy`, else the shipped one), listening, with a small file in its workspace;
    and its config's path. Stopped on the way out, whatever happened."""
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / "config.toml"
    config_path.write_text(f'[paths]\nhome = "{root / "home"}"\n{config}')
    if policy is not None:
        (root / "policy.toml").write_text(policy)
    env = {**os.environ, "BOXMAKER_HOME": str(root / "home")}
    brokerd = Process([str(BIN / "brokerd"), "serve", "--config", str(config_path)], env, root)
    try:
        try:
            brokerd.err.wait_for("listening on")
        except AssertionError as exc:
            raise BenchError(f"brokerd did not start:\n{brokerd.err.text()}") from exc
        (load_config(config_path, env).tools.workspace / FILE).write_text(FILE_TEXT)
        yield brokerd, config_path
    finally:
        brokerd.stop()


def _clients(config_path: Path) -> tuple[Broker, BrokerPort]:
    """A `Broker` in this process built as brokerd builds its own from `config_path` (the
    policy brokerd wrote beside it), and loopd's client of brokerd's socket."""
    config = load_config(config_path)
    policy = load_policy(
        config.broker.policy,
        PurePosixPath(config.tools.workspace),
        protected_paths(config, config_path),
    )
    inside = Broker(
        builtin_registry(config.tools.core), policy, config.tools.workspace,
        config.paths.home, SystemClock(), approval_timeout=config.tools.approval_timeout_s,
    )  # fmt: skip
    return inside, BrokerPort(config.broker.socket, CALL_TIMEOUT_S)


async def _series(
    name: str, requests: list[ToolRequest], warmup: int, through: Call, inside: Call, pid: int
) -> Series:
    """The pairs of `requests` after the first `warmup`, each in alternating order."""
    times: tuple[list[float], list[float]] = ([], [])
    before = 0.0
    for i, request in enumerate(requests):
        if i == warmup:
            before = cpu_seconds(pid)
        first, second = (through, inside) if i % 2 == 0 else (inside, through)
        one = await _timed(first, request)
        two = await _timed(second, request)
        (a, ms_a), (b, ms_b) = (one, two) if i % 2 == 0 else (two, one)
        _check(request, a, b)
        if i >= warmup:
            times[0].append(ms_a)
            times[1].append(ms_b)
    calls = len(requests) - warmup
    cpu_ms = (cpu_seconds(pid) - before) * 1000 / max(calls, 1)
    return Series(name, times[0], times[1], cpu_ms)


async def _timed(call: Call, request: ToolRequest) -> tuple[ToolResponse, float]:
    start = time.perf_counter()
    response = await call(request)
    return response, (time.perf_counter() - start) * 1000


def _check(request: ToolRequest, through: ToolResponse, inside: ToolResponse) -> None:
    """Both calls ran and answered alike (a clock's time aside)."""
    if not isinstance(through, ResultResponse) or not isinstance(inside, ResultResponse):
        raise BenchError(f"{request.tool}: through brokerd {through}, in process {inside}")
    if request.tool != "clock" and through != inside:
        raise BenchError(f"{request.tool} answered otherwise: {through} and {inside}")


def _row(measured: list[Series], *, calls: int, warmup: int, seconds: float) -> Row:
    lines = []
    for series in measured:
        added = spread(series.added)
        lines.append(
            f"| {series.name} | {spread(series.through).show()} | "
            f"{spread(series.inside).show()} | **{added.median:+.3f}** "
            f"(min {added.low:+.3f}, max {added.high:+.3f}) | {p90(series.added):+.3f} | "
            f"{series.cpu_ms:.3f} |"
        )
    medians = [statistics.median(series.added) for series in measured]
    clock, files = measured[0], measured[1]
    details = (
        f"{calls:,} pairs per series after {warmup} warm-up pairs ({seconds:.1f} s in all): one "
        "call through `BrokerPort` to a real `brokerd serve` (a new connection each, as loopd "
        "makes), and the same call on a `Broker` in this process built from the same config, "
        "registry, policy and workspace; the two in alternating order.",
        "",
        "| call | through brokerd (ms) | in process (ms) | added, median of pairs (ms) | "
        "added, p90 (ms) | brokerd's CPU per call (ms) |",
        "|---|---|---|---|---|---|",
        *lines,
        "",
        "brokerd's CPU per call is its user and system time from `/proc/<pid>/stat` (all its "
        "threads, in clock ticks) over a series' timed calls, divided by them: accepting, the "
        "owner's check, decoding the frame, the call, encoding and writing the answer.",
    )
    return Row(
        figure="tool call through brokerd",
        result=f"{medians[0]:+.3f} ms per call (clock), {medians[1]:+.3f} ms (read_file); "
        f"brokerd {clock.cpu_ms:.3f} ms CPU per call (clock), {files.cpu_ms:.3f} ms "
        "(read_file)",
        bar=f"≤ {BAR_MS:g} ms added per call",
        met=all(median <= BAR_MS for median in medians),
        details=details,
    )
