"""Where `bxctl chat` reads what the person types: a line editor on a terminal, lines elsewhere.

On a terminal, prompt_toolkit's editor: no length limit (it reads the terminal raw, so the
4,095-byte line of the terminal's cooked mode does not apply), Emacs-style editing, history
kept per user in `$XDG_STATE_HOME/boxmaker/bxctl-history` (0600, trimmed to its last MiB), a
paste that the terminal marks (bracketed paste) is one message whatever its lines, and a
`\"\"\"` line opens a block that Enter continues until its closing `\"\"\"`. Alt-Enter starts a
new line anywhere. Piped input is read line by line, `\"\"\"` blocks gathered the same way.
Both are blocking; bxctl calls them in a worker thread.

While a turn runs, the same editor is the steering line (`steer`): Enter sends what
was typed as a soft break; Ctrl-C with text turns it into a hard break (Enter then sends it),
and on an empty line cancels the turn.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, TextIO

from attrs import frozen
from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.application.current import set_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output, create_output

from ..store import FileSystem
from .commands import BlockReader, block_open

__all__ = ["HISTORY_LIMIT", "History", "LineEditor", "LineReader", "Steered", "history_path"]

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
            FileSystem().replace_file(path, tail[start:] if start >= 0 else b"")
        return super().load_history_strings()


@frozen
class Steered:
    """What the steering line gave: a message to send as a `soft` or `hard` break; `cancel`
    (Ctrl-C on an empty line: cancel the turn); `back` (an empty Enter: nothing to send);
    `closed` (Ctrl-D: no more steering this turn); `unsent` (the turn ended first: `text` is
    what stood typed)."""

    kind: Literal["soft", "hard", "cancel", "back", "closed", "unsent"]
    text: str = ""


class _Cancel(Exception):
    pass


class _Unsent(Exception):
    def __init__(self, text: str) -> None:
        self.text = text


def _bindings(editor: LineEditor) -> KeyBindings:
    bindings = KeyBindings()
    steering = Condition(lambda: editor.steering)

    @bindings.add("c-c", filter=steering)
    def _stop(event: KeyPressEvent) -> None:
        if event.current_buffer.text.strip():
            editor.hard = not editor.hard  # the message stops the answer, or waits for a step
            event.app.invalidate()
        else:
            event.app.exit(exception=_Cancel())

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


STEER_HINT = "Enter: the model reads it after its current step · Ctrl-C: stop the answer for it"
HARD_HINT = "Enter: stop the answer now and send this · Ctrl-C: wait for a step after all"


class LineEditor:
    """The editor on a terminal; `read` gives one whole message (or command) at a time, and
    `steer` what is typed while a turn runs."""

    def __init__(
        self,
        history: History | None,
        *,
        stream: TextIO | None = None,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self.steering = False  # the steering line of a running turn, not the prompt
        self.hard = False  # its message is a hard break
        self._lock = threading.Lock()
        self._started = False  # the steering line is up (its app runs)
        self._ending = False  # the turn ended: the steering line must give its text back
        self.session: PromptSession[str] = PromptSession(
            self._message,
            history=history,
            key_bindings=_bindings(self),
            prompt_continuation="  ",
            input=input,
            output=output or create_output(stdout=stream or sys.stdout),
            complete_while_typing=False,
            enable_open_in_editor=False,
        )

    def _message(self) -> str:
        if not self.steering:
            return "> "
        return "stop> " if self.hard else "queue> "

    def _hint(self) -> str:
        return HARD_HINT if self.hard else STEER_HINT

    def read(self, default: str = "") -> str | None:
        """The next text (`default` standing typed at first); None at Ctrl-D on an empty line
        or Ctrl-C (the person leaves)."""
        self.session.bottom_toolbar = None  # a toolbar, even empty, takes a line
        try:
            return self.session.prompt(default=default)
        except (EOFError, KeyboardInterrupt):
            return None

    def steer(self) -> Steered:
        """The steering line, while a turn runs: what is typed there and what for. Keys typed
        before it opened are its first ones (the terminal kept them)."""
        self.steering, self.hard = True, False
        self.session.bottom_toolbar = self._hint
        try:
            text = self.session.prompt(pre_run=self._steering_started)
        except _Cancel:
            return Steered("cancel")
        except _Unsent as unsent:
            return Steered("unsent", unsent.text)
        except (EOFError, KeyboardInterrupt):
            return Steered("closed")
        finally:
            self.steering = False
            with self._lock:
                self._started, self._ending = False, False
        if not text.strip():
            return Steered("back")
        return Steered("hard" if self.hard else "soft", text)

    def _steering_started(self) -> None:
        with self._lock:
            self._started = True
            ending = self._ending
        if ending:
            self._give_back()

    def end_steering(self) -> None:
        """From another thread: the turn ended; a steering line (up, or about to be) returns
        what stands typed as `unsent`."""
        with self._lock:
            self._ending = True
            started = self._started
        loop = self.session.app.loop
        if started and loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: it gave back already
                loop.call_soon_threadsafe(self._give_back)

    def _give_back(self) -> None:
        app = self.session.app
        if app.is_running and not app.is_done:
            app.exit(exception=_Unsent(app.current_buffer.text))

    def above(self, text: str, stream: TextIO) -> None:
        """From another thread: write `text` to `stream` above the prompt (or the steering
        line), which is then drawn again below it; at once when neither is up."""
        app = self.session.app
        loop = app.loop

        def write() -> None:
            stream.write(text)
            stream.flush()

        def in_terminal() -> None:
            with set_app(app):  # the app this thread's context does not hold
                run_in_terminal(write)

        if app.is_running and loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: written below
                loop.call_soon_threadsafe(in_terminal)
                return
        write()

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

    def read(self, default: str = "") -> str | None:
        """The next text; `default` is for an editor (a pipe has nothing typed to carry)."""
        while line := self.stream.readline():
            text = self._blocks.feed(line.removesuffix("\n"))
            if text is not None:
                return text
        return self._blocks.pending()  # a block the input cut off, sent as it stands

    def interrupt(self) -> bool:
        return False  # a blocked readline cannot be told; its thread is abandoned
