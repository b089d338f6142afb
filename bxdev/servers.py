"""The two servers of `make run` and `make serve`, and the one instance per checkout.

Each server runs in its own process session (Ctrl-C in a chat is not for it) with its output
appended to a log file, so it outlives the launcher when `make serve` leaves it running. A
lock file (`servers.lock`) is held by the launcher and inherited by both servers: while any of
them lives, a second `make run` or `make serve` in the same checkout finds it taken and reads
`servers.json` to say what runs and how to reach it. `make stop` reads the same file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["Busy", "Instance", "Server", "bxctl_line", "port_taken", "stop_recorded"]

READY_S = 300.0
STOP_S = 20.0


class Busy(Exception):
    """Another instance runs in this checkout, or the port is another program's."""


class Server:
    """A background process whose output goes to `log`."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str],
                 keep_fds: tuple[int, ...] = ()) -> None:  # fmt: skip
        self.name = name
        self.args = args
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                args, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, pass_fds=keep_fds,
            )  # fmt: skip
        self.pid = self.process.pid

    def wait_http(self, url: str, timeout: float = READY_S) -> bool:
        """Until `url` answers 200 (llama-server's `/health` says 503 while it loads)."""

        def ready() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    return bool(answer.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        return self._wait(ready, timeout)

    def wait_socket(self, path: Path, timeout: float = READY_S) -> bool:
        """Until something accepts connections on the Unix socket `path`."""

        def ready() -> bool:
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(path))
                except OSError:
                    return False
                return True

        return self._wait(ready, timeout)

    def wait_line(self, text: str, timeout: float = READY_S) -> bool:
        """Until the log holds `text` (gatewayd says when it carries messages)."""
        return self._wait(lambda: text in self.log.read_text(errors="replace"), timeout)

    def _wait(self, ready: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            if ready():
                return True
            time.sleep(0.05)  # a real process: nothing to wait on but its answer
        return False

    def stop(self) -> None:
        _terminate(self.pid, lambda: self.process.poll() is not None)
        self.process.wait()

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class Instance:
    """The one `make run` or `make serve` of a checkout's run folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "servers.json"
        self._fd = -1

    def acquire(self) -> int:
        """Take the checkout's lock; the fd the servers must inherit.

        Raises:
            Busy: another instance holds it (the message says which and how to reach it).
        """
        fd = os.open(self.root / "servers.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Busy(self.describe_other()) from None
        self._fd = fd
        return fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def describe_other(self) -> str:
        record = self.read()
        if record is None:
            return f"another `make run` or `make serve` is starting in {self.root}"
        pids = ", ".join(f"{name} pid {pid}" for name, pid in record["servers"].items())
        what = "`make serve`" if record["mode"] == "serve" else "another `make run`"
        return (
            f"{what} already runs in this checkout ({pids}, since {record['started']}).\n"
            f"Chat with it from here:  {record['bxctl']}\n"
            "or stop it with `make stop`."
        )

    def write(self, mode: str, servers: list[Server], bxctl: str) -> None:
        record = {
            "mode": mode,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "servers": {s.name: s.pid for s in servers},
            "args": {s.name: s.args[0] for s in servers},
            "bxctl": bxctl,
        }
        partial = self.state.with_suffix(".partial")
        partial.write_text(json.dumps(record, indent=2) + "\n")
        partial.replace(self.state)

    def read(self) -> dict[str, Any] | None:
        try:
            record: dict[str, Any] = json.loads(self.state.read_text())
        except (OSError, ValueError):
            return None
        return record

    def forget(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.state.unlink()


def stop_recorded(instance: Instance) -> list[str]:
    """Stop the servers `servers.json` names (each only if that pid still runs the program
    recorded for it); the names of those stopped."""
    record = instance.read()
    stopped: list[str] = []
    if record is None:
        return stopped
    for name, pid in reversed(list(record["servers"].items())):
        if _runs(pid, record["args"][name]):
            _terminate(pid, lambda pid=pid: not _alive(pid))
            stopped.append(f"{name} (pid {pid})")
    instance.forget()
    return stopped


def port_taken(port: int) -> bool:
    """Whether something listens on 127.0.0.1:`port` (bound as llama-server binds it)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def bxctl_line(home: Path, bxctl: Path) -> str:
    """The exact command another terminal runs to chat with these servers."""
    return f"BOXMAKER_HOME={shlex.quote(str(home))} {shlex.quote(str(bxctl))} chat"


def _terminate(pid: int, gone: Any) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not gone():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """A live process (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _runs(pid: int, program: str) -> bool:
    """Whether `pid` is alive and runs `program` (not a recycled pid)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return _alive(pid) and program.encode() in argv
