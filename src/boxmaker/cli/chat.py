"""One chat with loopd: its turns sent and shown, and the loop that reads what is typed.

A turn is one connection: the `turn` frame out, frames in until the final one, each shown
as it comes (streamed text, `--json` lines, or only the answer at the end for `--say` into a
pipe). Each turn's outcome is an exit code (`commands.py`), so a script knows what happened.
On a terminal a timer redraws the live status line while the model has shown nothing yet.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal, Protocol

import trio

from ..channel import MAX_FRAME
from ..proto import (
    Break,
    Content,
    ErrorCode,
    Frame,
    Reasoning,
    SessionId,
    ToolCallStarted,
    TurnDoneFrame,
    TurnEventFrame,
    TurnFrame,
    WireError,
    dumps,
)
from .channel import Channel, ChannelError, open_channel
from .commands import (
    EXIT_CANCELLED,
    EXIT_CODES,
    EXIT_CONNECTION_LOST,
    EXIT_NO_LOOPD,
    EXIT_OTHER,
    EXIT_TOO_LONG,
    Command,
    Message,
    TurnFigures,
    Unknown,
    help_text,
    interpret,
    stats_text,
)
from .jsonout import JsonOut
from .render import Renderer

__all__ = ["Chat", "Failed", "Mode", "Out", "Reader", "Source", "interactive", "say"]

Mode = Literal["stream", "json", "answer"]
TICK_S = 0.1  # the status line's redraw
# One message's turn with steering (`steer.steered`, bound to its terminal): the exit code of
# the last turn shown, and the text left typed for the next prompt.
Steer = Callable[["Chat", str, Callable[[], None]], Awaitable[tuple[int, str]]]


class Failed(Exception):
    """A turn that ended before loopd's final frame; `code` is bxctl's own error code."""

    def __init__(self, exit_code: int, code: str, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.code = code


class Reader(Protocol):
    def read(self, default: str = "") -> str | None: ...
    def interrupt(self) -> bool: ...


class Out(Protocol):
    """Where a chat writes: a terminal or a pipe, or a `terminal.Screen` that holds it."""

    def write(self, text: str, /) -> int: ...
    def flush(self) -> None: ...


class Source(Protocol):
    """Frames of one turn: a connection, or what a steering message's connection kept."""

    async def receive(self) -> Frame: ...


class Chat:
    """One chat: a session, and how its turns are sent and shown."""

    def __init__(self, socket: Path, session: SessionId, *, resume: bool, thinking: bool,
                 mode: Mode, out: Out, err: Out, renderer: Renderer,
                 json: JsonOut | None = None) -> None:  # fmt: skip
        self.socket = socket
        self.session = session
        self.resume = resume
        self.thinking = thinking
        self.mode = mode
        self.out = out
        self.err = err
        self.renderer = renderer
        self.json = json or JsonOut()
        self.figures: TurnFigures | None = None
        self.new_epoch = False  # the next turn opens a fresh epoch first (`/new-epoch`)
        self._started = 0.0
        self._first_text: float | None = None
        self._tool_calls = 0

    async def probe(self) -> None:
        """Check that loopd listens (a connection it drops without a word).

        Raises:
            Failed: no loopd there (`no_loopd`).
        """
        channel = await self._open()
        await channel.aclose()

    def announce(self) -> None:
        """Say which session the turns go to: stdout, or stderr when stdout is the answer."""
        if self.mode == "json":
            self._write(self.json.session(self.session.value))
        elif self.mode == "answer":
            self.err.write(f"session {self.session}\n")
            self.err.flush()
        else:
            self._write(f"session {self.session}\n")

    def note(self, text: str) -> None:
        """bxctl's own answer to a command: for the person, never among `--json` frames."""
        stream = self.err if self.mode == "json" else self.out
        stream.write(text + "\n")
        stream.flush()

    def fail(self, failure: Failed) -> int:
        """Show an error bxctl found itself; its exit code."""
        if self.mode == "json":
            self._write(self.json.error(failure.code, str(failure)))
        else:
            self._write(self.renderer.end())
            self.err.write(f"error: {failure}\n")
            self.err.flush()
        return failure.exit_code

    async def turn(self, content: str, source: Source | None = None) -> int:
        """Run one turn, showing it as it goes; its exit code (0: done). With `source`, the
        turn is one a message sent while another ran started: its frames are shown."""
        self._started = trio.current_time()
        self._first_text, self._tool_calls = None, 0
        final: TurnDoneFrame | WireError | Failed
        async with trio.open_nursery() as nursery:
            if self.mode == "stream" and self.renderer.tty:
                nursery.start_soon(self._tick)
            try:
                if source is None:
                    final = await self._guess(content)
                else:
                    self.renderer.waiting(trio.current_time())
                    final = await self._receive(source, resume=True)
            except Failed as failure:
                final = failure
            finally:
                nursery.cancel_scope.cancel()
        if isinstance(final, Failed):
            return self.fail(final)
        if isinstance(final, TurnDoneFrame):
            seconds = trio.current_time() - self._started
            self.figures = TurnFigures(final.usage, seconds, self._first_text, self._tool_calls)
            return 0
        return EXIT_CODES.get(final.code, EXIT_OTHER)

    async def _guess(self, content: str) -> TurnDoneFrame | WireError:
        """The turn, continuing the session if it exists or starting it if not."""
        final = await self._send(content, self.resume)
        self.new_epoch = False
        if isinstance(final, WireError):
            if final.code is ErrorCode.NO_SUCH_SESSION and self.resume:
                final = await self._send(content, False)
            elif final.code is ErrorCode.SESSION_EXISTS and not self.resume:
                final = await self._send(content, True)
        if not (isinstance(final, WireError) and final.code is ErrorCode.NO_SUCH_SESSION):
            self.resume = True
        return final

    async def _open(self) -> Channel:
        try:
            return await open_channel(self.socket)
        except ChannelError as error:
            raise Failed(EXIT_NO_LOOPD, "no_loopd", str(error)) from error

    def _frame(self, content: str, resume: bool, brk: Break | None = None) -> TurnFrame:
        new_epoch = self.new_epoch and brk is None
        frame = TurnFrame(session=self.session, content=content, resume=resume,
                          thinking=self.thinking, break_=brk, new_epoch=new_epoch)  # fmt: skip
        size = len(dumps(frame))
        if size > MAX_FRAME:
            raise Failed(
                EXIT_TOO_LONG,
                "too_long",
                f"the message is {size:,} bytes as a frame; loopd takes at most {MAX_FRAME:,}",
            )
        return frame

    async def _send(self, content: str, resume: bool) -> TurnDoneFrame | WireError:
        frame = self._frame(content, resume)
        channel = await self._open()
        async with channel:
            self.renderer.waiting(trio.current_time())
            try:
                await channel.send(frame)
            except ChannelError as error:
                raise Failed(EXIT_CONNECTION_LOST, "connection_lost", str(error)) from error
            final = await self._receive(channel, resume)
            await channel.finish()
            return final

    async def send_break(self, content: str, brk: Break) -> Channel:
        """Send a message for the session's running turn on a connection of its own (its
        frames are the caller's to read, and the connection its to close).

        Raises:
            Failed: too long, no loopd, or the connection broke.
        """
        frame = self._frame(content, True, brk)
        channel = await self._open()
        try:
            await channel.send(frame)
        except ChannelError as error:
            await channel.aclose()
            raise Failed(EXIT_CONNECTION_LOST, "connection_lost", str(error)) from error
        return channel

    async def _receive(self, source: Source, resume: bool) -> TurnDoneFrame | WireError:
        """Show a turn's frames until its final one.

        Raises:
            Failed: the connection was lost first (`connection_lost`).
        """
        try:
            while True:
                received = await source.receive()
                if self._quiet_retry(received, resume):
                    return received  # type: ignore[return-value]
                self.show(received)
                if isinstance(received, TurnDoneFrame | WireError):
                    return received
        except ChannelError as error:
            raise Failed(EXIT_CONNECTION_LOST, "connection_lost", str(error)) from error

    def _quiet_retry(self, frame: Frame, resume: bool) -> bool:
        """The first answer of a resume-or-create guess is not shown when it will be retried."""
        if not isinstance(frame, WireError):
            return False
        return (frame.code is ErrorCode.NO_SUCH_SESSION and resume) or (
            frame.code is ErrorCode.SESSION_EXISTS and not resume
        )

    def show(self, frame: Frame) -> None:
        now = trio.current_time()
        if isinstance(frame, TurnEventFrame):
            if isinstance(frame.event, Content | Reasoning) and self._first_text is None:
                self._first_text = now - self._started
            self._tool_calls += isinstance(frame.event, ToolCallStarted)
        if self.mode == "json":
            self._write(self.json.frame(frame))
        elif self.mode == "answer":  # --say into a pipe: the answer is printed whole at the end
            if isinstance(frame, WireError):
                self.err.write(self.renderer.error(frame))
            elif isinstance(frame, TurnDoneFrame):
                self._write(frame.content + "\n")
        elif isinstance(frame, TurnEventFrame):
            self._write(self.renderer.event(frame.event, now))
        elif isinstance(frame, TurnDoneFrame):
            self._write(self.renderer.done(frame))
        elif isinstance(frame, WireError) and frame.code is ErrorCode.BREAK_HARD:
            self._write(self.renderer.end() + self.renderer.note("stopped by a hard break"))
        elif isinstance(frame, WireError):
            self._write(self.renderer.end())
            self.err.write(self.renderer.error(frame))
        self.out.flush()
        self.err.flush()

    def status(self, message: str) -> None:
        """One status line of bxctl's own, in the turn's text (for the person, not `--json`)."""
        if self.mode == "stream":
            self._write(self.renderer.note(message))

    def pause(self) -> None:
        """The steering line opens below: close the line the turn left open."""
        if self.mode == "stream":
            self._write(self.renderer.pause())

    def cancelled(self) -> int:
        """Ctrl-C cancelled the turn: say so; its exit code."""
        if self.mode == "json":
            self._write(self.json.error("cancelled", "the turn was cancelled (Ctrl-C)"))
            return EXIT_CANCELLED
        if self.mode == "stream":
            self._write(self.renderer.end())
        self.err.write("[turn cancelled]\n")
        self.err.flush()
        return EXIT_CANCELLED

    async def _tick(self) -> None:
        while True:
            await trio.sleep(TICK_S)
            self._write(self.renderer.tick(trio.current_time()))

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()


async def say(chat: Chat, text: str) -> int:
    """One turn; its exit code. Ctrl-C cancels it (exit 130)."""
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:
            code: list[int] = []

            async def run() -> None:
                code.append(await chat.turn(text))
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)
            async for _ in interrupts:
                nursery.cancel_scope.cancel()
                break
    return code[0] if code else chat.cancelled()


async def interactive(
    chat: Chat,
    reader: Reader,
    new_session: Callable[[], SessionId],
    listing: Callable[[], str] = lambda: "",
    steer: Steer | None = None,
) -> int:
    """Turns until the input ends or `/quit`; the exit code of the first turn that failed.
    `listing` gives what `/sessions` shows; with `steer` (a person at a terminal), what is
    typed while a turn runs steers it."""
    first_failure = 0
    carry = ""  # typed in the steering line when its turn ended: the next prompt shows it
    turn_scope: list[trio.CancelScope] = []
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:

            async def on_interrupt() -> None:
                async for _ in interrupts:
                    if turn_scope:
                        turn_scope[-1].cancel()  # Ctrl-C in a turn: cancel it
                    elif not reader.interrupt():  # SIGINT at the prompt: leave
                        nursery.cancel_scope.cancel()

            nursery.start_soon(on_interrupt)
            while True:
                text = await trio.to_thread.run_sync(reader.read, carry, abandon_on_cancel=True)
                carry = ""
                if text is None:
                    break
                match interpret(text):
                    case Command(name="/quit"):
                        break
                    case Command(name="/help"):
                        chat.note(help_text())
                    case Command(name="/stats"):
                        chat.note(stats_text(chat.figures))
                    case Command(name="/sessions"):
                        chat.note(listing())
                    case Command(name="/new-epoch"):
                        chat.new_epoch = True
                        chat.note("[the next message opens a new epoch: a summary of this one "
                                  "and its newest turns carry on]")  # fmt: skip
                    case Command(name="/new"):
                        chat.session, chat.resume, chat.figures = new_session(), False, None
                        chat.announce()
                    case Unknown(word=word):
                        chat.note(f"{word} is not a command: /help lists them (// sends a /)")
                    case Message(text=message):
                        with trio.CancelScope() as scope:
                            turn_scope.append(scope)
                            try:
                                if steer is None:
                                    code = await chat.turn(message)
                                else:
                                    code, carry = await steer(chat, message, scope.cancel)
                            finally:
                                turn_scope.pop()
                        if scope.cancelled_caught:
                            code = chat.cancelled()
                        first_failure = first_failure or code
            nursery.cancel_scope.cancel()
    return first_failure
