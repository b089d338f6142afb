"""`shell {command, timeout_s?}`: `bash -c command` in the sandbox, bounded in every way
(`sandbox/bwrap.py`), its output kept as it came (stdout and stderr one stream), its end said.

The result is the output, then one line: the exit code (or what stopped it: its time, its
output, memory, processes, a file's size), and the seconds. Output past `KEEP` bytes keeps its
head and its tail around a line saying how much was not kept; past `output_bytes` the run is
stopped. The text is `untrusted` (whatever the command read lands in it), of the workspace's
class. A run whose caller stops waiting (loopd's call timeout, or loopd gone) is cancelled
here, and so killed, whole.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable

import trio

from ...proto import DataClass, FailedResponse, ResultResponse, ToolResponse
from .bwrap import Run, Sandbox
from .digest import KEEP, Spool

__all__ = ["KEEP", "Spool", "run_shell", "stopped_by"]

log = logging.getLogger("brokerd")

NO_OUTPUT = "(no output)\n"


def stopped_by(run: Run, code: int | None, sandbox: Sandbox) -> list[str]:
    """What the limits did to a run that ended with `code` (as the shell reports a signal:
    128 + its number)."""
    limits, said = sandbox.limits, []
    group = run.group
    if group is not None and group.memory_hit():
        said.append(f"a process was killed at the {limits.memory_bytes // 2**20} MiB memory limit")
    if group is not None and group.pids_hit():
        said.append(f"a fork was refused at the {limits.processes}-process limit")
    signals = {
        signal.SIGXFSZ: f"a file reached the {limits.file_bytes // 2**20} MiB size limit",
        signal.SIGXCPU: f"a process used its {limits.cpu_s} CPU seconds",
    }
    if code is not None and code - 128 in signals:
        said.append(signals[signal.Signals(code - 128)])
    return said


async def run_shell(
    sandbox: Sandbox,
    command: str,
    timeout: float,
    data_class: DataClass,
    *,
    confined: bool = True,
    ran: Callable[[str, int | None], None] | None = None,
) -> ToolResponse:
    """Run `command`; its output and how it ended, or why it could not start. `ran` is told
    the output and the exit code (None: it was stopped) of a command that started."""
    spool, limits = Spool(), sandbox.limits
    start = trio.current_time()
    ended: list[str] = []
    code: int | None = None
    try:
        async with sandbox.running(["/bin/bash", "-c", command], confined=confined) as run:
            assert run.process.stdout is not None
            with trio.move_on_after(timeout) as timer:
                while chunk := await run.process.stdout.receive_some(65536):
                    spool.add(chunk)
                    if spool.total > limits.output_bytes:
                        ended.append(f"stopped: it printed over {limits.output_bytes:,} bytes")
                        break
                else:
                    code = await run.process.wait()
            if timer.cancelled_caught:
                ended.append(f"stopped at its {timeout:g} s limit")
            ended += stopped_by(run, code, sandbox)
    except OSError as error:
        log.warning("shell could not start: %s", error)
        return FailedResponse(f"the sandbox could not start the command: {error}")
    seconds = trio.current_time() - start
    status = "killed" if code is None else f"exit {code}"
    if code is not None and code > 128:
        with contextlib.suppress(ValueError):  # a number that names no signal
            status += f" ({signal.Signals(code - 128).name})"
    line = " · ".join([status, f"{seconds:.2f} s", *ended])
    output = spool.text()
    if ran is not None:
        ran(output, code)
    if output and not output.endswith("\n"):
        output += "\n"
    return ResultResponse(
        f"{output or NO_OUTPUT}[{line}]",
        data_class,
        untrusted=True,
        truncated=bool(spool.tail) and spool.total > 2 * spool.keep,
        is_error=code != 0,  # it failed, or was stopped (its time, its output, a limit)
    )
