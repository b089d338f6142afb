"""A daemon's socket (loopd's `loop.sock`, brokerd's `broker.sock`): made so that only its
owner can reach it, and only one daemon ever listens on it.

The socket is born 0600 in a folder loopd made 0700, or one its user alone can write; a folder
that anyone else can write (a shared `/tmp`) is refused, never changed (loopd used to chmod
the folder, following links: `/tmp` itself, as root). Before anything is bound, loopd takes an
exclusive lock on `<socket>.lock` beside it (`lock.py`), so two loopds (even with two homes)
never both listen on one path: the one that gets the lock may replace a stale socket file, and
the other is refused, naming the holder. On the way out the socket file is removed only if it
is still the one this loopd bound (same device and inode): a socket someone put there since
is not ours to remove.
"""

from __future__ import annotations

import contextlib
import os
import socket as stdlib_socket
import stat
from pathlib import Path

import trio

from .. import layout
from ..session import Exposed
from ..store import exposure
from .lock import Locked, PidLock, take_lock

__all__ = ["AlreadyServing", "SocketServer", "UnixListener", "open_unix_listener"]

BACKLOG = 128


class AlreadyServing(Exception):
    """Another loopd (or something else) is listening on the socket."""


class UnixListener(trio.abc.Listener[trio.SocketStream]):
    """The listening socket, with its lock; `aclose()` removes the file if it is still ours."""

    def __init__(self, listener: trio.SocketListener, path: Path, lock: PidLock) -> None:
        self._listener = listener
        self.path = path
        self._lock = lock
        bound = os.lstat(path)
        self._identity = (bound.st_dev, bound.st_ino)

    async def accept(self) -> trio.SocketStream:
        return await self._listener.accept()

    async def aclose(self) -> None:
        try:
            await self._listener.aclose()
            if self.still_ours():
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
        finally:
            self._lock.release()

    def still_ours(self) -> bool:
        """Whether the file at the path is the socket this listener bound."""
        try:
            there = os.lstat(self.path)
        except FileNotFoundError:
            return False
        return (there.st_dev, there.st_ino) == self._identity


class SocketServer:
    """Accepts connections until told to stop; then lets the running ones finish for a grace
    period and cancels what is left. A subclass says what a connection is (`handle`)."""

    def __init__(self) -> None:
        self._accepting = trio.CancelScope()
        self._grace = 0.0
        self.connections = 0  # open now

    def stop(self, grace: float) -> None:
        """Stop accepting; running connections get `grace` seconds to finish."""
        self._grace = grace
        self._accepting.cancel()

    async def serve(
        self,
        listener: UnixListener,
        *,
        task_status: trio.TaskStatus[list[UnixListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until `stop()`; the socket file is removed once no longer listening (if it
        is still the one bound).

        `trio.serve_listeners` accepts (pausing while the process is out of file descriptors:
        that is the daemon's own limit, not a peer's fault, and the peers wait in the backlog);
        the connections run in a nursery of their own, which outlives the accepting by the
        grace.
        """
        async with trio.open_nursery() as connections:
            try:
                with self._accepting:
                    await trio.serve_listeners(
                        self._handle,
                        [listener],
                        handler_nursery=connections,
                        task_status=task_status,
                    )
            finally:
                await listener.aclose()
            connections.cancel_scope.deadline = trio.current_time() + self._grace

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        try:
            await self.handle(stream)
        finally:
            self.connections -= 1

    async def handle(self, stream: trio.SocketStream) -> None:
        raise NotImplementedError


async def open_unix_listener(path: Path, who: str = "loopd") -> UnixListener:
    """Listen on `path` (mode 0600, in a folder only loopd's user can write), replacing a
    stale socket file.

    Raises:
        AlreadyServing: another loopd holds the socket's lock, or something listens there.
        Exposed: the folder (or the lock file) is not loopd's user's alone.
        OSError: the folder or the socket cannot be made.
    """
    _prepare_folder(path.parent)
    try:
        lock = take_lock(layout.lock_beside(path))
    except Locked as error:
        holder = f"pid {error.pid}" if error.pid is not None else "a process"
        raise AlreadyServing(f"another {who} ({holder}) is already listening on {path}") from error
    try:
        await _clear(path, who)
        sock = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is born 0600
        try:
            await sock.bind(str(path))
        finally:
            os.umask(old_umask)
        sock.listen(BACKLOG)
        return UnixListener(trio.SocketListener(sock), path, lock)
    except BaseException:
        lock.release()
        raise


def _prepare_folder(folder: Path) -> None:
    """Make the socket's folder (0700) if it is missing; an existing one must be loopd's
    user's alone. Nothing that exists is ever changed."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # the umask keeps parents 0700 too
    if (said := exposure(folder, follow=True)) is not None:
        raise Exposed(folder, said)


async def _clear(path: Path, who: str) -> None:
    """Remove a stale socket at `path` (no one listens on it); refuse anything else there."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise AlreadyServing(f"{path} is not a socket; {who} does not replace it")
    try:
        probe = await trio.open_unix_socket(str(path))
    except OSError:
        os.unlink(path)  # nobody listens: left by a loopd that did not stop cleanly
    else:
        await probe.aclose()
        raise AlreadyServing(f"another process is already listening on {path}")
