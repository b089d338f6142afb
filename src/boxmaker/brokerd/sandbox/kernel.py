"""`run_cell {code}`: a Python interpreter per session, in the sandbox, kept while brokerd runs.

Each session's interpreter is the system's `python3` running `cell_kernel.py`, started at its
first cell, and kept (its variables from cell to cell, across turns) until brokerd stops, it is
idle for `[tools] kernel_idle_s`, `MOST_KERNELS` others are newer, or a cell ends it: a cell
past `cell_timeout_s`, one that prints over `output_bytes`, a caller that stops waiting, or
the interpreter's own end. Then the next cell starts a new one, and every cell of a new
interpreter says so (nothing earlier cells defined exists in it: brokerd's restart included).

The interpreters' processes are tasks of `Kernels.run`, brokerd's own nursery, not of the call
that started them: a call only talks to one, over its stdin and stdout, bounded in bytes and time.

A cell's result is its digest (`digest.py`); the values too long for it are queued here and
given to the interpreter with its next cell, as is the last `shell` output of its session
(`bind_shell`, which never starts an interpreter nor waits for one): a stopped interpreter
reads nothing between cells, and a value is read back only by a later cell. What a cell
prints may be anything its interpreter holds, so its result is of the highest class of every
cell and shell output the interpreter was given (a high-water mark, `_Kernel.mark`), and
untrusted, as every cell's.

Nothing a cell started runs after its result: once a cell ends, a process or a thread it left
running ends the interpreter (the result says so: its state is lost), and an interpreter left
alone is stopped (SIGSTOP) until its next cell, so not even a timer or a signal handler of the
cell's runs between cells. Should an idle interpreter still use more than `IDLE_CPU_S` CPU
seconds in `IDLE_WINDOW_S` (watched every `watch` seconds), it is ended, and its session's next
cell is told why.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import signal
from collections import OrderedDict, deque
from importlib import resources

import trio

from ...config import SandboxConfig
from ...proto import DataClass, FailedResponse, ResultResponse, SessionId, ToolResponse
from ..files.roots import highest
from .bwrap import Run, Sandbox
from .cell_wire import CellEnd, CellReader, Cut, Lost, Printed, cell_request
from .digest import Kept, Outputs, budget_of, digest, lost_state, sh_last
from .gate import busy, slot
from .process_tree import Leftovers, cpu_seconds, kill_all, leftovers, state_of, tree_of

__all__ = [
    "DIGEST_BYTES",
    "IDLE_CPU_S",
    "IDLE_WINDOW_S",
    "MOST_KERNELS",
    "MOST_VALUES",
    "NEW_INTERPRETER",
    "Kernels",
]

log = logging.getLogger("brokerd")

MOST_KERNELS = 8  # interpreters at once; past it the one idle longest is stopped
NEW_INTERPRETER = "(A new Python interpreter: nothing that earlier cells defined exists in it.)\n"
IDLE_CPU_S = 1.0  # the most CPU an idle interpreter may use in a window
IDLE_WINDOW_S = 60.0
MOST_VALUES = 4_000_000  # characters an interpreter's `values` holds; the oldest dropped first
DIGEST_BYTES = budget_of(SandboxConfig().digest_value_tokens)  # the config's default
PAUSE_WHEN_IDLE = True  # a seam: the tests of the CPU watch turn the pause off
_SETTLE = (0.005,) * 10  # waits for a thread or child that is ending as the cell ends
_SCRIPT = resources.files("boxmaker.brokerd.sandbox").joinpath("cell_kernel.py").read_text("utf-8")


def _kill_run(run: Run) -> None:
    """Kill every process of `run` now (its cgroup's, or its tree's: bwrap's namespace's init
    among them, whose end ends whatever else is in its namespace)."""
    if run.group is not None:
        run.group.kill()
    kill_all(set(tree_of(run.process.pid).parents))


async def _stopped(pid: int) -> None:
    """Stop `pid` (SIGSTOP), and return once it is (a signal is delivered, not at once; at
    most 0.5 s), so that the result goes back to the model only after it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    for _try in range(500):
        if state_of(pid) in ("T", "t", "X", "Z", ""):  # stopped, or gone
            return
        await trio.sleep(0.001)
    log.warning("the interpreter %d did not stop within 0.5 s", pid)


class _Lost(Exception):
    """The interpreter is gone or must go; the message says why, for the model."""


class _Kernel:
    def __init__(self, session: SessionId, identity: str = "") -> None:
        self.session = session
        self.identity = identity  # the session's, as it was when this one started
        self.lock = trio.Lock()
        self.ready = trio.Event()
        self.stop = trio.Event()
        self.stdin: trio.abc.SendStream | None = None
        self.stdout: trio.abc.ReceiveStream | None = None
        self.fresh = True  # no cell has run in it yet
        self.error: str | None = None  # why it could not start
        self.idle = trio.CancelScope()
        self.outputs = Outputs()
        self.run: Run | None = None
        self.cells = 0  # run in it so far
        self.paused: int | None = None  # the interpreter's pid, while it is stopped
        self.name = secrets.token_hex(3)  # in its cells' names: `values.get("3@<name>", 1)`
        self.mark = DataClass.PUBLIC  # the highest class it was given
        self.keep: tuple[Kept, ...] = ()  # for `values`, with the next cell
        self.sh_last: dict[str, object] | None = None  # for `sh.last`, with the next cell

    async def cell(
        self, code: str, timeout: float, most: int, values: int
    ) -> tuple[Outputs, dict[str, str]]:
        assert self.stdin is not None
        assert self.stdout is not None
        nonce = secrets.token_hex(8).encode()
        reader = CellReader(nonce)
        outputs = self.outputs = Outputs()  # what it printed, kept when the cell is lost
        request = cell_request(
            code,
            nonce,
            cell=f"{self.cells}@{self.name}",
            most=values,
            keep=[(k.cell, k.index, k.text) for k in self.keep],
            sh_last=self.sh_last,
        )
        self.keep, self.sh_last = (), None
        if self.paused is not None:
            with contextlib.suppress(ProcessLookupError):  # gone: it is said below
                os.kill(self.paused, signal.SIGCONT)
            self.paused = None
        end: CellEnd | None = None
        with trio.move_on_after(timeout) as timer:
            try:
                await self.stdin.send_all(request)
                while end is None:
                    match reader.next_event():
                        case Printed(data=data):
                            outputs.add(data)
                        case Cut():
                            outputs.cut()
                        case CellEnd() as end:
                            pass
                        case Lost(reason=reason):
                            raise _Lost(reason)
                        case _:  # NEED_DATA
                            if not reader.marked and outputs.total > most:
                                raise _Lost(f"the cell printed over {most:,} bytes")
                            reader.receive_data(await self.stdout.receive_some(65536))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                raise _Lost("the interpreter ended") from error
        if timer.cancelled_caught or end is None:
            raise _Lost(f"the cell ran past its {timeout:g} s")
        return outputs, end.fields


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
        watch: float = 10.0,
        digest_bytes: int = DIGEST_BYTES,
        values: int = MOST_VALUES,
    ) -> None:
        self.sandbox = sandbox
        self.limiter = limiter  # shared with shell: `[sandbox] concurrency`
        self.idle = idle
        self.timeout = timeout
        self.slot_wait = slot_wait  # for the limiter, then the cell is not run
        self.watch = watch  # seconds between two looks at an idle interpreter's CPU
        self.digest_bytes = digest_bytes  # a value longer is a stub (`[sandbox]`'s budget)
        self.values = values  # characters each interpreter's `values` holds at most
        # why a session's last interpreter was ended, and whose it was (its identity)
        self._why: dict[SessionId, tuple[str, str]] = {}
        self._kernels: OrderedDict[SessionId, _Kernel] = OrderedDict()
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the interpreters until cancelled (then every one is killed)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def cell(
        self,
        session: SessionId,
        code: str,
        data_class: DataClass,
        *,
        confined: bool = True,
        identity: str = "",
    ) -> ToolResponse:
        """Run one cell in the session's interpreter (one started if it has none, or only one
        of another session of that id, `identity` says: a removed one's is ended)."""
        if self._nursery is None:
            return FailedResponse("brokerd's interpreters are not running")
        while True:
            kernel = await self._kernel(session, confined, identity)
            async with kernel.lock:
                if kernel.error is not None:
                    return FailedResponse(kernel.error)
                if kernel.stop.is_set() or kernel.idle.cancel_called:
                    continue  # it ended (or its idle time came) while this call waited
                new = self._new(kernel)
                kernel.idle.deadline = math.inf
                kernel.mark = highest(kernel.mark, data_class)
                lost, left, most = None, None, self.sandbox.limits.output_bytes
                try:
                    async with slot(self.limiter, self.slot_wait) as got:
                        if not got:
                            return busy(self.limiter, self.slot_wait)
                        kernel.fresh = False
                        kernel.cells += 1
                        outputs, end = await kernel.cell(code, self.timeout, most, self.values)
                except _Lost as error:
                    lost, outputs, end = str(error), kernel.outputs, {}
                    self._end(kernel)
                except BaseException:  # cancelled mid-cell (its caller stopped waiting)
                    self._end(kernel)
                    raise
                finally:
                    kernel.idle.deadline = trio.current_time() + self.idle
                    if kernel.run is not None and not kernel.stop.is_set():
                        with trio.CancelScope(shield=True):
                            left = await self._after(kernel)
                break
        keeping = not kernel.stop.is_set()  # else a stub would name a value already gone
        name, budget = f"{kernel.cells}@{kernel.name}", self.digest_bytes
        said = digest(outputs, end, cell=name, budget=budget, keeping=keeping)
        kernel.keep = said.kept  # no checkpoint since the lock: the next cell sends them
        parts = [said.text, *lost_state(left, lost, self.sandbox.limits.memory_bytes)]
        failed = lost is not None or left is not None or "error" in end
        text = new + "\n".join(part.rstrip("\n") for part in parts if part) or "(no output)"
        return ResultResponse(text, kernel.mark, untrusted=True, truncated=False, is_error=failed)

    def bind_shell(
        self,
        session: SessionId,
        output: str,
        code: int | None,
        data_class: DataClass,
        identity: str = "",
    ) -> None:
        """A `shell` run of `session` (as `identity`) printed `output` and ended with `code`:
        its interpreter, if one is running, has it as `sh.last` from its next cell on, and
        its results are of `data_class` at least from now. Never starts one, never waits."""
        kernel = self._kernels.get(session)
        if kernel is None or kernel.identity != identity or kernel.stop.is_set():
            return
        kernel.sh_last = sh_last(output, code)
        kernel.mark = highest(kernel.mark, data_class)

    async def _kernel(self, session: SessionId, confined: bool, identity: str) -> _Kernel:
        kernel = self._kernels.get(session)
        if kernel is not None and kernel.identity != identity:
            self.end(session)  # another session's, that had this id: none of it carries over
            kernel = None
        if kernel is not None and not kernel.stop.is_set():
            self._kernels.move_to_end(session)
            return kernel
        idle = [k for k in self._kernels.values() if not k.lock.locked()]  # oldest first
        for oldest in idle[: max(0, len(self._kernels) - MOST_KERNELS + 1)]:
            self._end(oldest)  # never one whose cell runs
        kernel = self._kernels[session] = _Kernel(session, identity)
        assert self._nursery is not None
        self._nursery.start_soon(self._hold, kernel, confined)
        await kernel.ready.wait()
        return kernel

    def _new(self, kernel: _Kernel) -> str:
        """What a cell says first: that its interpreter is new, and why the last one ended."""
        if not kernel.fresh:
            return ""
        whose, why = self._why.pop(kernel.session, ("", ""))
        if whose != kernel.identity:
            why = ""  # another session's, that had this id: nothing of it is said
        return NEW_INTERPRETER + (f"(The last one was ended: {why}.)\n" if why else "")

    def end(self, session: SessionId, identity: str = "") -> None:
        """`session` (as `identity`; "": whichever) is gone (removed, or another has its id
        now): its interpreter ends, and nothing is said of it to the next."""
        kernel = self._kernels.get(session)
        if identity and kernel is not None and kernel.identity != identity:
            return  # another session's, that took the id since
        self._why.pop(session, None)
        if kernel is not None:
            log.info("the interpreter of %s ends with its session", session)
            self._end(kernel)

    def _end(self, kernel: _Kernel) -> None:
        kernel.stop.set()
        if self._kernels.get(kernel.session) is kernel:
            del self._kernels[kernel.session]

    async def _after(self, kernel: _Kernel) -> str | None:
        """A cell ended: what it left running (then the whole run is killed at once, and the
        interpreter ended), or None, and the interpreter is stopped until its next cell. The
        interpreter is stopped before the last look, so that it cannot start a thread or a
        process after it."""
        run = kernel.run
        assert run is not None

        def look() -> Leftovers:
            among = run.group.pids() if run.group is not None else None
            return leftovers(run.process.pid, 2 if run.confined else 0, among)

        for pause in _SETTLE:  # a thread or a child ending with the cell is let end
            left = await trio.to_thread.run_sync(look)
            if not left:
                break
            await trio.sleep(pause)
        if left.command is not None and PAUSE_WHEN_IDLE:
            await _stopped(left.command)
            kernel.paused = left.command
            left = await trio.to_thread.run_sync(look)  # what is left now can no more grow
        if left:
            await trio.to_thread.run_sync(_kill_run, run)
            self._end(kernel)
            return left.said()
        return None

    async def _watch(self, kernel: _Kernel, run: Run) -> None:
        """End `kernel` if, idle, it uses more than `IDLE_CPU_S` in `IDLE_WINDOW_S`."""
        seen: deque[tuple[float, float, int]] = deque()  # (when, CPU seconds, cells run)
        while True:
            await trio.sleep(self.watch)
            among = run.group.pids() if run.group is not None else None
            used = await trio.to_thread.run_sync(cpu_seconds, run.process.pid, among)
            now = trio.current_time()
            if kernel.lock.locked():
                continue  # a cell runs: its time is its own
            seen.append((now, used, kernel.cells))
            while seen and (seen[0][0] < now - IDLE_WINDOW_S or seen[0][2] != kernel.cells):
                seen.popleft()
            if seen and (spent := used - seen[0][1]) > IDLE_CPU_S:
                why = (
                    f"it used {spent:.1f} CPU seconds in {now - seen[0][0]:.0f} s while no "
                    f"cell ran, past the {IDLE_CPU_S:g} s a minute an idle one may"
                )
                log.warning("the interpreter of %s is ended: %s", kernel.session, why)
                self._why[kernel.session] = (kernel.identity, why)
                self._end(kernel)
                return

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
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._watch, kernel, run)
                        await kernel.stop.wait()
                        nursery.cancel_scope.cancel()
                log.info("the interpreter of %s stops", kernel.session)
        except OSError as error:
            kernel.error = f"the sandbox could not start an interpreter: {error}"
            log.warning("%s", kernel.error)
        finally:
            kernel.ready.set()
            self._end(kernel)
