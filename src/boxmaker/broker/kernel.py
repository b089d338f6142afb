"""`run_cell {code}`: a Python interpreter per session, in the sandbox, kept while brokerd runs.

Each session's interpreter is the system's `python3` running `cell_kernel.py`, started at its
first cell, and kept (its variables from cell to cell, across turns) until brokerd stops, it is
idle for `[tools] kernel_idle_s`, `MOST_KERNELS` others are newer, or a cell ends it: a cell
past `cell_timeout_s`, one that prints over `output_bytes`, a caller that stops waiting, or
the interpreter's own end. Then the next cell starts a new one, and every cell of a new
interpreter says so (nothing earlier cells defined exists in it: brokerd's restart included).

The interpreters' processes are tasks of `Kernels.run`, brokerd's own nursery, not of the call
that started them: a call only talks to one, over its stdin and stdout, bounded in bytes and time.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections import OrderedDict
from importlib import resources

import trio

from ..proto import DataClass, FailedResponse, ResultResponse, SessionId, ToolResponse
from .sandbox import Run, Sandbox, busy, kill_strays, slot
from .shell import Spool

__all__ = ["MOST_KERNELS", "NEW_INTERPRETER", "Kernels"]

log = logging.getLogger("brokerd")

MOST_KERNELS = 8  # interpreters at once; past it the one idle longest is stopped
MOST_DONE = 1024 * 1024  # bytes of a cell's end (its value and traceback are cut before)
NEW_INTERPRETER = "(A new Python interpreter: nothing that earlier cells defined exists in it.)\n"
_SCRIPT = resources.files("boxmaker.broker").joinpath("cell_kernel.py").read_text("utf-8")


class _Lost(Exception):
    """The interpreter is gone or must go; the message says why, for the model."""


class _Kernel:
    def __init__(self, session: SessionId) -> None:
        self.session = session
        self.lock = trio.Lock()
        self.ready = trio.Event()
        self.stop = trio.Event()
        self.stdin: trio.abc.SendStream | None = None
        self.stdout: trio.abc.ReceiveStream | None = None
        self.fresh = True  # no cell has run in it yet
        self.error: str | None = None  # why it could not start
        self.idle = trio.CancelScope()
        self.spool = Spool()
        self.run: Run | None = None

    async def cell(self, code: str, timeout: float, most: int) -> tuple[Spool, dict[str, str]]:
        assert self.stdin is not None
        assert self.stdout is not None
        nonce = secrets.token_hex(8).encode()
        marker = b"\0bx-done " + nonce + b" "
        spool = self.spool = Spool()  # what it printed, kept when the cell is lost
        pending = bytearray()
        request = json.dumps({"code": code, "nonce": nonce.decode()}).encode() + b"\n"
        with trio.move_on_after(timeout) as timer:
            try:
                await self.stdin.send_all(request)
                while (at := pending.find(marker)) < 0:
                    spool.add(bytes(pending[: max(0, len(pending) - len(marker) - 24)]))
                    del pending[: max(0, len(pending) - len(marker) - 24)]
                    if spool.total > most:
                        raise _Lost(f"the cell printed over {most:,} bytes")
                    if not (chunk := await self.stdout.receive_some(65536)):
                        raise _Lost("the interpreter ended")
                    pending += chunk
                spool.add(bytes(pending[:at]))
                del pending[: at + len(marker)]
                while b"\n" not in pending[:12]:
                    if len(pending) > 12 or not (chunk := await self.stdout.receive_some()):
                        raise _Lost("the interpreter sent what is not a cell's end")
                    pending += chunk
                size_text, _, rest = bytes(pending).partition(b"\n")
                size = int(size_text) if size_text.isdigit() else MOST_DONE + 1
                if size > MOST_DONE:
                    raise _Lost("the interpreter sent a cell's end too long to take")
                done = bytearray(rest)
                while len(done) < size:
                    if not (chunk := await self.stdout.receive_some(size - len(done))):
                        raise _Lost("the interpreter ended")
                    done += chunk
                end = json.loads(bytes(done[:size]))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                raise _Lost("the interpreter ended") from error
            except ValueError as error:
                raise _Lost("the interpreter sent what is not a cell's end") from error
        if timer.cancelled_caught:
            raise _Lost(f"the cell ran past its {timeout:g} s")
        if not isinstance(end, dict):
            raise _Lost("the interpreter sent what is not a cell's end")
        return spool, {k: v for k, v in end.items() if isinstance(v, str)}


class Kernels:
    """Every session's interpreter; `run` (brokerd's nursery) holds their processes."""

    def __init__(
        self,
        sandbox: Sandbox,
        limiter: trio.CapacityLimiter,
        *,
        idle: float,
        timeout: float,
        slot_wait: float = math.inf,
    ) -> None:
        self.sandbox = sandbox
        self.limiter = limiter  # shared with shell: `[sandbox] concurrency`
        self.idle = idle
        self.timeout = timeout
        self.slot_wait = slot_wait  # for the limiter, then the cell is not run
        self._kernels: OrderedDict[SessionId, _Kernel] = OrderedDict()
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the interpreters until cancelled (then every one is killed)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def cell(
        self, session: SessionId, code: str, data_class: DataClass, *, confined: bool = True
    ) -> ToolResponse:
        """Run one cell in the session's interpreter (one started if it has none)."""
        if self._nursery is None:
            return FailedResponse("brokerd's interpreters are not running")
        while True:
            kernel = await self._kernel(session, confined)
            async with kernel.lock:
                if kernel.error is not None:
                    return FailedResponse(kernel.error)
                if kernel.stop.is_set() or kernel.idle.cancel_called:
                    continue  # it ended (or its idle time came) while this call waited
                new = NEW_INTERPRETER if kernel.fresh else ""
                kernel.idle.deadline = math.inf
                lost, most = None, self.sandbox.limits.output_bytes
                try:
                    async with slot(self.limiter, self.slot_wait) as got:
                        if not got:
                            return busy(self.limiter, self.slot_wait)
                        kernel.fresh = False
                        spool, end = await kernel.cell(code, self.timeout, most)
                except _Lost as error:
                    lost, spool, end = str(error), kernel.spool, {}
                    self._end(kernel)
                except BaseException:  # cancelled mid-cell (its caller stopped waiting)
                    self._end(kernel)
                    raise
                finally:
                    kernel.idle.deadline = trio.current_time() + self.idle
                    if kernel.run is not None and not kernel.stop.is_set():
                        kill_strays(kernel.run)  # nothing a cell started runs on after it
                break
        text = new + spool.text()
        if lost is not None:
            limit = self.sandbox.limits.memory_bytes // 2**20
            text += (
                f"[{lost}: the interpreter was stopped and its state lost (every variable); "
                f"the next cell starts a new one. Memory is capped at {limit} MiB.]"
            )
        elif (failure := end.get("error")) is not None:
            text += failure
        elif (value := end.get("value")) is not None:
            text += value
        return ResultResponse(text or "(no output)", data_class, untrusted=True, truncated=False)

    async def _kernel(self, session: SessionId, confined: bool) -> _Kernel:
        kernel = self._kernels.get(session)
        if kernel is not None and not kernel.stop.is_set():
            self._kernels.move_to_end(session)
            return kernel
        idle = [k for k in self._kernels.values() if not k.lock.locked()]  # oldest first
        for oldest in idle[: max(0, len(self._kernels) - MOST_KERNELS + 1)]:
            self._end(oldest)  # never one whose cell runs
        kernel = self._kernels[session] = _Kernel(session)
        assert self._nursery is not None
        self._nursery.start_soon(self._hold, kernel, confined)
        await kernel.ready.wait()
        return kernel

    def _end(self, kernel: _Kernel) -> None:
        kernel.stop.set()
        if self._kernels.get(kernel.session) is kernel:
            del self._kernels[kernel.session]

    async def _hold(self, kernel: _Kernel, confined: bool) -> None:
        """One interpreter's life: started, held until stopped or idle, then killed whole."""
        python = self.sandbox.python
        try:
            if python is None:
                raise OSError("this machine has no system python3 (/usr/bin/python3)")
            argv = [python, "-I", "-u", "-c", _SCRIPT]
            async with self.sandbox.running(argv, stdin_pipe=True, confined=confined) as run:
                kernel.stdin, kernel.stdout = run.process.stdin, run.process.stdout
                kernel.run = run
                log.info("an interpreter for %s started", kernel.session)
                kernel.ready.set()
                kernel.idle.deadline = trio.current_time() + self.idle
                with kernel.idle:
                    await kernel.stop.wait()
                log.info("the interpreter of %s stops", kernel.session)
        except OSError as error:
            kernel.error = f"the sandbox could not start an interpreter: {error}"
            log.warning("%s", kernel.error)
        finally:
            kernel.ready.set()
            self._end(kernel)
