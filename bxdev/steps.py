"""A long job told as it goes: one line per stage with a rough estimate, a compile's progress
as one percentage line, and every line the tools print kept in a log file that a failure names.

    steps = Steps("llama-server", log_path, total=5)
    steps.run("configuring with cmake", "about 30 s", ["cmake", ...])
    steps.run("compiling llama-server", "about 12 min on 2 cores", [...], progress=True)

On a terminal (stderr) the percentage line is rewritten in place; elsewhere (a CI log) a line
is printed at every tenth. Standard library only: this runs before anything else is installed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

__all__ = ["StepFailed", "Steps", "compile_percent", "duration"]

# `[ 45%] Building CXX object ...` (make) and `[123/456] Building CXX object ...` (ninja).
_MAKE = re.compile(r"^\[\s*(\d{1,3})%\]")
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")


class StepFailed(Exception):
    """A stage's command failed; the message names it, the log and the log's last lines."""


def compile_percent(line: str) -> int | None:
    """The build's progress in a line of make's or ninja's output, 0 to 100; None if none."""
    if match := _MAKE.match(line):
        return min(int(match[1]), 100)
    if (match := _NINJA.match(line)) and int(match[2]) > 0:
        return min(100 * int(match[1]) // int(match[2]), 100)
    return None


def duration(seconds: float) -> str:
    """`0.3 s`, `42 s`, `3 min 5 s`, `1 h 2 min`: how long, read at a glance."""
    if seconds < 9.95:
        return f"{max(seconds, 0):.1f} s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


class Steps:
    """Numbered stages of one job, their output in `log`."""

    def __init__(self, name: str, log: Path, total: int, *, err: IO[str] = sys.stderr,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.name = name
        self.log = log
        self.total = total
        self.done = 0
        self._err = err
        self._clock = clock
        self._started = clock()
        self._tty = err.isatty()
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"# {name}: started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")

    def say(self, message: str) -> None:
        self._err.write(f"{self.name}: {message}\n")
        self._err.flush()

    def stage(self, what: str, estimate: str) -> float:
        """Announce the next stage; its start time."""
        self.done += 1
        self.say(f"[{self.done}/{self.total}] {what} ({estimate})")
        with self.log.open("a") as out:
            out.write(f"\n# [{self.done}/{self.total}] {what}\n")
        return self._clock()

    def run(self, what: str, estimate: str, args: Sequence[str], *, cwd: Path | None = None,
            progress: bool = False) -> None:  # fmt: skip
        """Run one stage's command, its output into the log; a percentage line if `progress`.

        Raises:
            StepFailed: the command could not start or exited non-zero.
        """
        started = self.stage(what, estimate)
        with self.log.open("a") as out:
            out.write("$ " + " ".join(args) + "\n")
            out.flush()
            try:
                process = subprocess.Popen(
                    args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, errors="replace",
                )  # fmt: skip
            except OSError as exc:
                raise StepFailed(f"{what}: cannot run {args[0]}: {exc.strerror or exc}") from None
            shown = -1
            with process:
                assert process.stdout is not None
                for line in process.stdout:
                    out.write(line)
                    percent = compile_percent(line) if progress else None
                    if percent is not None and percent > shown:
                        shown = self._progress(what, percent, started, shown)
            code = process.wait()
        if self._tty and shown >= 0:
            self._err.write("\n")
        if code != 0:
            raise StepFailed(
                f"{what} failed (exit {code}); the full log is {self.log}; it ends:\n{self.tail()}"
            )
        self.finished(what, started)

    def command(self, args: Sequence[str]) -> None:
        """Run a command of the current stage, its output into the log only.

        Raises:
            StepFailed: it could not start or exited non-zero.
        """
        with self.log.open("a") as out:
            out.write("$ " + " ".join(args) + "\n")
            out.flush()
            try:
                code = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, check=False).returncode  # fmt: skip
            except OSError as exc:
                raise StepFailed(f"cannot run {args[0]}: {exc.strerror or exc}") from None
        if code != 0:
            raise StepFailed(
                f"{args[0]} failed (exit {code}); the full log is {self.log}; it ends:\n"
                f"{self.tail()}"
            )

    def finished(self, what: str, started: float) -> None:
        with self.log.open("a") as out:
            out.write(f"# {what}: done in {duration(self._clock() - started)}\n")
        self.say(f"      done in {duration(self._clock() - started)}")

    def _progress(self, what: str, percent: int, started: float, shown: int) -> int:
        """Show `percent` (a line at each tenth when not on a terminal); what is now shown."""
        if not self._tty and percent // 10 == max(shown, 0) // 10 and shown >= 0:
            return shown
        elapsed = self._clock() - started
        # The first files compile at a different pace from the rest: no guess before a tenth.
        left = (
            f", about {duration(elapsed * (100 - percent) / percent)} left"
            if 10 <= percent < 100
            else ""
        )
        line = f"{self.name}:       {what}: {percent}% after {duration(elapsed)}{left}"
        self._err.write(("\r\x1b[K" + line) if self._tty else line + "\n")
        self._err.flush()
        return percent

    def total_time(self) -> str:
        return duration(self._clock() - self._started)

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
