"""Real processes for end-to-end tests: the fake server on TCP, loopd serve, bxctl.

Waiting is for events, never for time: a process's output is read line by line in a thread,
and a test waits until the line it needs appears (with a generous upper bound so a broken
build fails instead of hanging).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bxdev.processes import WAIT_S, Process

BIN = Path(sys.executable).parent
SYSTEM = "You are Boxmaker, in an end-to-end test.\n"


class Stack:
    """A fake llama-server and loopd serve in `root`, torn down by `stop`."""

    def __init__(self, root: Path, script: dict[str, Any], *fake_args: str,
                 config: str = "", loopd_args: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.root = root
        self.home = root / "home"
        self.env = {**os.environ, "BOXMAKER_HOME": str(self.home), "NO_COLOR": "1"}
        (root / "system.md").write_text(SYSTEM)
        (root / "script.json").write_text(json.dumps(script))
        self.fake = Process(
            [str(BIN / "python"), "-m", "boxmaker.testing", "--script",
             str(root / "script.json"), *fake_args],
            self.env,
            root,
        )  # fmt: skip
        url = self.fake.out.wait_for("listening on").split()[-1]
        self.config = root / "config.toml"
        self.config.write_text(f'[server]\nbase_url = "{url}"\n{config}')
        self.socket = self.home / "run" / "loop" / "loop.sock"
        self.loopd = self.start_loopd(*loopd_args)
        self.loopd.err.wait_for("listening on")

    def start_loopd(self, *args: str) -> Process:
        return Process(
            [str(BIN / "loopd"), "serve", "--config", str(self.config), *args], self.env, self.root
        )

    def bxctl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "bxctl"), "chat", *args],
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )

    def bxctl_process(self, *args: str) -> Process:
        return Process([str(BIN / "bxctl"), "chat", *args], self.env, self.root)

    def log(self, session: str) -> list[dict[str, Any]]:
        path = self.home / "sessions" / session / "0.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def stop(self) -> None:
        self.loopd.stop()
        self.fake.stop()


class Terminal:
    """A program on a pseudo-terminal: type into it, read its screen."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        import pty

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            os.execve(args[0], args, env)
        self.screen = ""

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait_for(self, text: str, timeout: float = WAIT_S, start: int = 0) -> int:
        """Read until `text` shows after offset `start`; its offset in the screen."""
        deadline = time.monotonic() + timeout
        while (found := self.screen.find(text, start)) < 0:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"{text!r} never showed; the screen:\n{self.screen}")
            try:
                self.screen += os.read(self.fd, 65536).decode(errors="replace")
            except OSError:  # the program ended
                raise AssertionError(f"{text!r} never showed; the screen:\n{self.screen}") from None
        return found

    def exit_code(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
