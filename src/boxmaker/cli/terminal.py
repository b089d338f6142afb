"""The terminal while a turn runs, for steering it: its keys, and the chat's text.

`Keyboard` keeps what is typed unechoed and unread (Ctrl-C still a signal) until the steering
line opens and reads it; `Screen` passes the chat's text through, or holds it while that line
is up. No prompt_toolkit here: bxctl wraps its output in a `Screen` whatever it runs.
"""

from __future__ import annotations

import contextlib
import termios
from collections.abc import Iterator

import trio

from .chat import Out

__all__ = ["Keyboard", "Screen"]


class Screen:
    """Where a chat writes at a terminal: straight through, or held while the steering line
    is up, then written at once."""

    def __init__(self, stream: Out) -> None:
        self.stream = stream
        self._held: list[str] | None = None

    def write(self, text: str, /) -> int:
        if self._held is None:
            return self.stream.write(text)
        self._held.append(text)
        return len(text)

    def flush(self) -> None:
        if self._held is None:
            self.stream.flush()

    def hold(self) -> None:
        self._held = []

    def release(self) -> None:
        held, self._held = self._held or [], None
        self.stream.write("".join(held))
        self.stream.flush()


class Keyboard:
    """The terminal's keys while a turn runs: not echoed (the steering line shows them), not
    read until it opens, Ctrl-C still SIGINT."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        try:
            saved = termios.tcgetattr(self.fd)
        except termios.error:  # not a terminal after all: nothing to change
            yield
            return
        quiet = [*saved[:6], list(saved[6])]
        quiet[3] = saved[3] & ~(termios.ICANON | termios.ECHO)
        quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
        termios.tcsetattr(self.fd, termios.TCSANOW, quiet)
        try:
            yield
        finally:  # TCSANOW: keys typed meanwhile stay for the prompt
            termios.tcsetattr(self.fd, termios.TCSANOW, saved)

    async def typed(self) -> None:
        """Until a key waits to be read."""
        await trio.lowlevel.wait_readable(self.fd)
