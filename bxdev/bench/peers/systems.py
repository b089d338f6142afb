"""The systems the peers row talks to, each as the same three steps: `start()` (a new
process, timed until it is ready), `turn(n)` (turn n of the conversation, timed by the
system's own client) and `stop()`. A peer is its driver (`drive.py`) in the peer's own
environment, told each turn on its standard input; loopd is `loopd serve` and a minimal
channel client. Also: the recording proxy as a process, and `converse`, which runs the ten
turns through every system at once, interleaved, with every process started anew between
turns 5 and 6.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from ..harness import BenchError, Loopd, open_loopd, timed_turn, turn_frame
from .venvs import PeerEnv

__all__ = ["Child", "LoopdSystem", "PeerSystem", "System", "converse", "open_proxy"]

DRIVE = Path(__file__).parent / "drive.py"
PROXY = Path(__file__).parent / "proxy.py"
START_S = 120.0  # a process until it is ready (a cold start imports a whole framework)
TURN_S = 600.0  # a turn, most of it the real server on two shared cores
STOP_S = 10.0
PHASES = ((1, 5), (6, 10))  # turns in one process, then the rest in a new one


@attrs.define
class Child:
    """A process this row reads line by line, its standard error in a log file."""

    process: trio.Process
    name: str
    log: Path
    _pending: bytearray = attrs.field(factory=bytearray)

    @classmethod
    async def open(cls, args: Sequence[str], *, name: str, log: Path, stdin: bool) -> Child:
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1"}
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as err:
            process = await trio.lowlevel.open_process(
                list(args),
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=log.parent,
            )
        return cls(process, name, log)

    async def line(self, timeout: float) -> str:
        """The next line the process writes.

        Raises:
            BenchError: it ended, or wrote no line within `timeout`.
        """
        assert self.process.stdout is not None
        with trio.move_on_after(timeout):
            while (cut := self._pending.find(b"\n")) < 0:
                chunk = await self.process.stdout.receive_some(1 << 16)
                if not chunk:
                    raise BenchError(f"{self.name} ended; its log ends:\n{self.log_tail()}")
                self._pending += chunk
            line = bytes(self._pending[:cut])
            del self._pending[: cut + 1]
            return line.decode()
        raise BenchError(f"{self.name} wrote nothing for {timeout:.0f} s:\n{self.log_tail()}")

    async def send(self, text: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(text.encode())

    async def aclose(self) -> None:
        """Close its input (a driver ends there), then terminate it, then kill it."""
        with trio.CancelScope(shield=True):
            if self.process.stdin is not None:
                await self.process.stdin.aclose()
                with trio.move_on_after(STOP_S):
                    await self.process.wait()
            for stop in (self.process.terminate, self.process.kill):
                if self.process.poll() is None:
                    stop()
                    with trio.move_on_after(STOP_S):
                        await self.process.wait()

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


async def open_proxy(root: Path, upstream: str, python: Path) -> tuple[Child, str]:
    """The recording proxy in front of `upstream`, logging to `root/requests.jsonl`; its URL."""
    args = [str(python), "-P", str(PROXY), "--upstream", upstream]
    args += ["--log", str(root / "requests.jsonl")]
    child = await Child.open(args, name="the proxy", log=root / "proxy.log", stdin=False)
    try:
        line = await child.line(START_S)
    except BaseException:
        await child.aclose()
        raise
    return child, line.split()[-1]


class System(Protocol):
    @property
    def name(self) -> str: ...

    async def start(self) -> float:
        """Start a new process; seconds until it is ready."""

    async def turn(self, number: int) -> float:
        """Turn `number`; seconds, as the system's own client measures them."""

    async def stop(self) -> None: ...


@attrs.define
class PeerSystem:
    """A peer's driver in the peer's environment; its history in `state`."""

    env: PeerEnv
    state: Path
    plan: dict[str, Any]
    answers: dict[int, str] = attrs.field(factory=dict)
    _child: Child | None = None

    @property
    def name(self) -> str:
        return self.env.peer

    async def start(self) -> float:
        self.state.mkdir(parents=True, exist_ok=True)
        plan = self.state.parent / f"{self.name}-plan.json"
        plan.write_text(json.dumps({**self.plan, "state": str(self.state)}))
        args = [str(self.env.python), "-P", str(DRIVE), self.name, str(plan)]
        start = time.perf_counter()
        log = self.state.parent / f"{self.name}-driver.log"
        self._child = await Child.open(args, name=self.name, log=log, stdin=True)
        if json.loads(await self._child.line(START_S)) != {"ready": True}:
            raise BenchError(f"{self.name}'s driver did not say it was ready")
        return time.perf_counter() - start

    async def turn(self, number: int) -> float:
        assert self._child is not None
        await self._child.send(f"{number}\n")
        said = json.loads(await self._child.line(TURN_S))
        if said.get("turn") != number:
            raise BenchError(f"{self.name} answered {said} to turn {number}")
        self.answers[number] = str(said["answer"])
        return float(said["secs"])

    async def stop(self) -> None:
        if self._child is not None:
            await self._child.aclose()
            self._child = None


@attrs.define
class LoopdSystem:
    """`loopd serve` in `root` for the server at `url`; one session, one turn frame a turn."""

    root: Path
    url: str
    config: str
    session: str
    messages: Sequence[str]
    name: str = "loopd"
    events: dict[int, int] = attrs.field(factory=dict)
    _stack: ExitStack | None = None
    _loopd: Loopd | None = None

    async def start(self) -> float:
        start = time.perf_counter()
        self._stack = ExitStack()
        self._loopd = self._stack.enter_context(open_loopd(self.root, self.url, config=self.config))
        return time.perf_counter() - start

    async def turn(self, number: int) -> float:
        assert self._loopd is not None
        frame = turn_frame(self.session, self.messages[number - 1], resume=number > 1)
        times = await timed_turn(self._loopd.socket, frame)
        self.events[number] = times.events
        return times.total

    async def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = self._loopd = None


Turn = Callable[[System, int], Awaitable[None]]


async def converse(
    systems: Sequence[System], turn: Turn, *, rotation: int = 0
) -> dict[str, list[float]]:
    """Ten turns through every system, interleaved: each turn goes to every system before the
    next, in an order rotated each turn (so no system always follows the same one). Every
    system starts a new process for turns 1-5 and again for 6-10. Returns each system's
    start-up times."""
    startups: dict[str, list[float]] = {system.name: [] for system in systems}
    for first, last in PHASES:
        try:
            for system in systems:
                startups[system.name].append(await system.start())
            for number in range(first, last + 1):
                at = (number + rotation) % len(systems)
                for system in [*systems[at:], *systems[:at]]:
                    await turn(system, number)
        finally:
            with trio.CancelScope(shield=True):
                for system in systems:
                    await system.stop()
    return startups
