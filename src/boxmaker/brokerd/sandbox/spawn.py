"""A process started from the event loop's own thread, with trio streams for its pipes.

Not `trio.lowlevel.open_process`: that forks in a worker thread, and Linux delivers a parent's
death signal (`PR_SET_PDEATHSIG`, which `bwrap --die-with-parent` sets) when the *thread* that
forked exits, not the process. trio ends an idle worker thread after 10 s, so every sandboxed
run and interpreter was killed 10 s after it started. The loop's thread lives as long as
brokerd, so here the signal comes when brokerd dies, as it should. A fork from a thread of
brokerd's size costs about a millisecond (`posix_spawn`/`vfork`), briefly holding the loop.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

__all__ = ["Child", "spawn"]


class Child:
    """A started process: its pid, its pipes (None unless piped), its end."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: trio.lowlevel.FdStream | None,
        stdout: trio.lowlevel.FdStream | None,
        stderr: trio.lowlevel.FdStream | None = None,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr  # None: stderr is stdout's pipe

    @property
    def pipes(self) -> tuple[trio.lowlevel.FdStream, ...]:
        return tuple(p for p in (self.stdin, self.stdout, self.stderr) if p is not None)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        """Its exit status, as `subprocess` gives it (a signal as its negative number)."""
        if (code := self._popen.poll()) is not None:
            return code
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:  # a kernel before 5.3: no pidfd to wait on, so poll
            while (code := self._popen.poll()) is None:  # noqa: ASYNC110
                await trio.sleep(0.05)
            return code
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        return self._popen.wait()


def spawn(
    argv: Sequence[str],
    *,
    stdin_pipe: bool,
    env: Mapping[str, str],
    cwd: Path,
    stderr_pipe: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> Child:
    """Start `argv` in a new session, stdin a pipe or /dev/null, stdout a pipe, and stderr
    stdout's pipe or (`stderr_pipe`) one of its own; `pass_fds` are inherited as they are.

    Raises:
        OSError: it cannot start.
    """
    out_read, out_write = os.pipe()
    in_read, in_write = subprocess.DEVNULL, -1
    err_read, err_write = -1, out_write
    try:
        if stdin_pipe:
            in_read, in_write = os.pipe()
        if stderr_pipe:
            err_read, err_write = os.pipe()
        popen = subprocess.Popen(
            list(argv),
            stdin=in_read,
            stdout=out_write,
            stderr=err_write,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
        )
    except BaseException:
        for fd in (out_read, in_write, err_read):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in {out_write, err_write, in_read}:
            if fd >= 0:
                os.close(fd)
    stdin = trio.lowlevel.FdStream(in_write) if stdin_pipe else None
    stderr = trio.lowlevel.FdStream(err_read) if stderr_pipe else None
    return Child(popen, stdin, trio.lowlevel.FdStream(out_read), stderr)
