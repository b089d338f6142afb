"""Where `bxctl chat` reads what the person types: a line editor on a terminal, lines elsewhere.

On a terminal, prompt_toolkit's editor: no length limit (it reads the terminal raw, so the
4,095-byte line of the terminal's cooked mode does not apply), Emacs-style editing, history
kept per user in `$XDG_STATE_HOME/boxmaker/bxctl-history` (0600, trimmed to its last MiB), a
paste that the terminal marks (bracketed paste) is one message whatever its lines, and a
`\"\"\"` line opens a block that Enter continues until its closing `\"\"\"`. Alt-Enter starts a
new line anywhere. Piped input is read line by line, `\"\"\"` blocks gathered the same way.
Both are blocking; bxctl calls them in a worker thread.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output, create_output

from .commands import BlockReader, block_open

__all__ = ["HISTORY_LIMIT", "History", "LineEditor", "LineReader", "history_path"]

HISTORY_LIMIT = 1024 * 1024  # bytes of history kept; older entries are dropped at start


def history_path(environ: Mapping[str, str]) -> Path:
    """`$XDG_STATE_HOME/boxmaker/bxctl-history`, else `~/.local/state/boxmaker/...`."""
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local/state"
    return base / "boxmaker" / "bxctl-history"


class History(FileHistory):
    """prompt_toolkit's history file, its owner's alone (0600 in a 0700 folder) and bounded:
    past `limit` bytes, the oldest entries are dropped when it is loaded."""

    def __init__(self, path: Path, limit: int = HISTORY_LIMIT) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        self.limit = limit
        super().__init__(path)

    def load_history_strings(self) -> Iterable[str]:
        path = Path(self.filename)  # type: ignore[arg-type]
        if path.stat().st_size > self.limit:
            with path.open("rb") as f:
                f.seek(-self.limit, os.SEEK_END)
                tail = f.read()
            start = tail.find(b"\n# ")  # an entry's first line: keep whole entries only
            partial = path.with_name(path.name + ".partial")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(tail[start:] if start >= 0 else b"")
            partial.replace(path)
        return super().load_history_strings()


def _bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if block_open(buffer.text):
            buffer.newline(copy_margin=False)
        else:
            buffer.validate_and_handle()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.newline(copy_margin=False)

    return bindings


class LineEditor:
    """The editor on a terminal; `read` gives one whole message (or command) at a time."""

    def __init__(self, history: History | None, *, stream: TextIO | None = None,
                 input: Input | None = None, output: Output | None = None) -> None:  # fmt: skip
        self.session: PromptSession[str] = PromptSession(
            "> ",
            history=history,
            key_bindings=_bindings(),
            prompt_continuation="  ",
            input=input,
            output=output or create_output(stdout=stream or sys.stdout),
            complete_while_typing=False,
            enable_open_in_editor=False,
        )

    def read(self) -> str | None:
        """The next text; None at Ctrl-D on an empty line or Ctrl-C (the person leaves)."""
        try:
            return self.session.prompt()
        except (EOFError, KeyboardInterrupt):
            return None

    def interrupt(self) -> bool:
        """From another thread: make a running `read` return None (a SIGINT at the prompt), so
        the terminal is given back as it was. True: `read` will return."""
        app = self.session.app
        if not (app.is_running and app.loop is not None):
            return False
        app.loop.call_soon_threadsafe(lambda: app.exit(exception=KeyboardInterrupt()))
        return True


class LineReader:
    """Piped input: a line is a text, and so is a `\"\"\"` block."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._blocks = BlockReader()

    def read(self) -> str | None:
        while line := self.stream.readline():
            text = self._blocks.feed(line.removesuffix("\n"))
            if text is not None:
                return text
        return self._blocks.pending()  # a block the input cut off, sent as it stands

    def interrupt(self) -> bool:
        return False  # a blocked readline cannot be told; its thread is abandoned
