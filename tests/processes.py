"""Real processes for end-to-end tests: the fake server on TCP, brokerd serve, loopd serve,
bxctl.

Waiting is for events, never for time: a process's output is read line by line in a thread,
and a test waits until the line it needs appears (with a generous upper bound so a broken
build fails instead of hanging).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bxdev.processes import WAIT_S, Process

BIN = Path(sys.executable).parent
SYSTEM = "You are Boxmaker, in an end-to-end test.\n"
# A test's terminal does not answer prompt_toolkit's cursor position requests.
QUIET_EDITOR = {"PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"  # a terminal's bracketed paste


class Stack:
    """A fake llama-server, brokerd serve and loopd serve in `root`, torn down by `stop`."""

    replay = True  # its sessions replayed when it stops (off: a test changes them by hand)

    def __init__(self, root: Path, script: dict[str, Any], *fake_args: str,
                 config: str = "", loopd_args: tuple[str, ...] = (),
                 policy: str | None = None) -> None:  # fmt: skip
        self.root = root
        self.home = root / "home"
        self.env = {**os.environ, "BOXMAKER_HOME": str(self.home), "NO_COLOR": "1", **QUIET_EDITOR}
        self.env["XDG_STATE_HOME"] = str(root / "state")  # bxctl's history: the test's own
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
        self.workspace = self.home / "workspace"
        if policy is not None:  # else brokerd writes the shipped one there
            (root / "policy.toml").write_text(policy)
        started = [self.fake]
        try:  # a daemon that does not come up leaves nothing of the stack running
            self.brokerd = self.start_brokerd()
            started.append(self.brokerd)
            self.brokerd.err.wait_for("listening on")
            self.loopd = self.start_loopd(*loopd_args)
            started.append(self.loopd)
            self.loopd.err.wait_for("listening on")
        except BaseException:
            for process in reversed(started):
                process.stop()
            raise
        self._holds = self._releases = 0

    def hold(self) -> None:
        """Another client's task takes the fake's slot 0: requests wait there until
        `release` (the fake says each on stdout once done)."""
        self._holds += 1
        self.fake.popen.send_signal(signal.SIGUSR1)
        self.fake.out.wait_for(f"slot 0 held by another client ({self._holds})")

    def release(self) -> None:
        self._releases += 1
        self.fake.popen.send_signal(signal.SIGUSR2)
        self.fake.out.wait_for(f"slot 0 released ({self._releases})")

    def start_brokerd(self) -> Process:
        return Process(
            [str(BIN / "brokerd"), "serve", "--config", str(self.config)], self.env, self.root
        )

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
        self.brokerd.stop()
        self.fake.stop()
        if self.replay:
            self.replays_identical()

    def replays_identical(self) -> None:
        """Every session the stack made replays identical (SPEC section 20): `bxctl replay
        --all`, with no server and no brokerd running."""
        if not any((self.home / "sessions").glob("*/0.jsonl")):
            return
        result = subprocess.run(
            [str(BIN / "bxctl"), "replay", "--all", "--home", str(self.home), "--json"],
            env=self.env, capture_output=True, text=True, timeout=WAIT_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr


# Escape sequences, dropped from `Terminal.screen`: a CSI (cursor moves, colours, modes) or
# an OSC (a title); `\x1b[nC` (cursor forward) is kept as n spaces.
_ESCAPE = re.compile(r"\x1b(?:\[[0-9;?<=>]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_FORWARD = re.compile(r"\x1b\[(\d*)C")
_INCOMPLETE = re.compile(r"\x1b(?:\[[0-9;?<=>]*[ -/]*|\][^\x07\x1b]*)?$")
EDITOR_READY = "\x1b[?2004h"  # prompt_toolkit asks for bracketed paste as each prompt starts


class Terminal:
    """A program on a pseudo-terminal: type into it, read its screen.

    `screen` is the text it wrote with the escape sequences taken out (a cursor moved forward
    counts as spaces), so a test finds words in it; `prompts` holds the offsets in `screen`
    where the line editor started a prompt.
    """

    def __init__(self, args: list[str], env: dict[str, str], rows: int = 24,
                 columns: int = 80) -> None:  # fmt: skip
        import fcntl
        import pty
        import struct
        import termios

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            os.execve(args[0], args, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        os.set_blocking(self.fd, False)  # a full keyboard buffer never blocks the test
        self.screen = ""
        self.raw = ""  # as written, escape sequences and all
        self.prompts: list[int] = []
        self._pending = ""  # an escape sequence cut by a read

    def type(self, text: str) -> None:
        """Type `text`, reading the screen as it goes: a program that echoes a long input
        would otherwise block on a full terminal while this blocks on a full keyboard."""
        data = text.encode()
        deadline = time.monotonic() + WAIT_S
        while data:
            readable, writable, _ = select.select([self.fd], [self.fd], [], WAIT_S)
            if readable:
                self._read_ready()
            if writable:
                with contextlib.suppress(BlockingIOError):
                    data = data[os.write(self.fd, data[:1024]) :]
            if time.monotonic() > deadline:
                raise AssertionError(f"the terminal took no input for {WAIT_S} s")

    def paste(self, text: str) -> None:
        """Paste as a terminal does when the program asked for bracketed paste."""
        self.type(PASTE_START + text + PASTE_END)

    def _read_ready(self) -> None:
        with contextlib.suppress(OSError):  # nothing more now, or the program ended
            while data := os.read(self.fd, 65536):
                self._add(data)

    def wait_for(self, text: str, timeout: float = WAIT_S, start: int = 0) -> int:
        """Read until `text` shows after offset `start`; its offset in the screen."""
        self._wait(lambda: self.screen.find(text, start) >= 0, timeout, f"{text!r}")
        return self.screen.find(text, start)

    def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"{what} never showed; the screen:\n{self.screen}")
            try:
                self._add(os.read(self.fd, 65536))
            except BlockingIOError:
                continue
            except OSError:  # the program ended
                raise AssertionError(f"{what} never showed; the screen:\n{self.screen}") from None

    def _add(self, data: bytes) -> None:
        self.raw += data.decode(errors="replace")
        text = self._pending + data.decode(errors="replace")
        cut = _INCOMPLETE.search(text)
        self._pending = text[cut.start() :] if cut else ""
        text = text[: cut.start()] if cut else text
        for piece in re.split(f"({re.escape(EDITOR_READY)})", text):
            if piece == EDITOR_READY:
                self.prompts.append(len(self.screen))
                continue
            piece = _FORWARD.sub(lambda m: " " * int(m[1] or 1), piece)
            self.screen += _ESCAPE.sub("", piece)

    def wait_for_prompt(self, start: int = 0, timeout: float = WAIT_S) -> int:
        """Wait until the line editor starts a prompt after `start`; its offset."""
        self._wait(lambda: self.prompts[-1:] >= [start], timeout, f"a prompt after {start}")
        return next(at for at in self.prompts if at >= start)

    def exit_code(self, timeout: float = WAIT_S) -> int:
        """Wait for the program to end (reading what it still shows); its exit code.

        Raises:
            AssertionError: it had not ended after `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the program did not end in {timeout} s:\n{self.screen}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if ready:
                self._read_ready()

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def wait_until(done: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll `done` (what another process writes, which sends no event) until it holds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never came within {timeout:g} s")
        time.sleep(0.01)
