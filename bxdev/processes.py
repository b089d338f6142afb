"""Real processes read as they run: a process's output is read line by line in threads, so its
pipes never fill up and block it, and a caller waits until the line it needs appears (with an
upper bound, so a broken build fails instead of hanging). Used by the end-to-end tests and by
`make bench`.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import IO

__all__ = ["WAIT_S", "Lines", "Process"]

WAIT_S = 60.0


class Lines:
    """Everything a process writes on one pipe, kept as lines; `wait_for` blocks on them."""

    def __init__(self, pipe: IO[str]) -> None:
        self.lines: list[str] = []
        self.closed = False
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: IO[str]) -> None:
        for line in iter(pipe.readline, ""):
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = WAIT_S, times: int = 1) -> str:
        """The first line holding `text`, once `times` lines have held it."""

        def seen() -> int:
            return sum(text in line for line in self.lines)

        with self._cond:
            self._cond.wait_for(lambda: self.closed or seen() >= times, timeout)
            found = [line for line in self.lines if text in line]
        if len(found) < times:
            raise AssertionError(f"{text!r} never came; got:\n{''.join(self.lines)}")
        return found[0]

    def text(self) -> str:
        with self._cond:
            return "".join(self.lines)


class Process:
    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.popen = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.popen.stdout is not None
        assert self.popen.stderr is not None
        self.out = Lines(self.popen.stdout)
        self.err = Lines(self.popen.stderr)

    def wait(self, timeout: float = WAIT_S) -> int:
        return self.popen.wait(timeout)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        for pipe in (self.popen.stdout, self.popen.stderr):
            if pipe is not None:
                pipe.close()
