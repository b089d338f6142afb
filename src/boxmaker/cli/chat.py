"""One chat with loopd: its turns sent and shown (the loop that reads what is typed is
`turns.py`).

A turn is one connection: the `turn` frame out, frames in until the final one, each shown
as it comes (streamed text, `--json` lines, or only the answer at the end for `--say` into a
pipe). A call that needs the owner's approval is put to `asker` (a question at the terminal,
or `--yes`), answered on a connection of its own; without one, the turn frame says this
channel cannot ask. Each turn's outcome is an exit code (`commands.py`), so a script knows
what happened. On a terminal a timer redraws the live status line while the model has shown
nothing yet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal, Protocol

import trio

from ..channel import MAX_FRAME
from ..client import Channel, ChannelError, open_channel
from ..proto import (
    ApprovalAnswered,
    ApprovalNeeded,
    Break,
    Content,
    ErrorCode,
    FileOffer,
    Frame,
    QueuedMessage,
    Reasoning,
    SessionId,
    ToolCallStarted,
    TurnDoneFrame,
    TurnEventFrame,
    TurnFrame,
    WireError,
    dumps,
)
from ..proto import Mode as SessionMode
from .commands import (
    EXIT_CANCELLED,
    EXIT_CODES,
    EXIT_CONNECTION_LOST,
    EXIT_NO_LOOPD,
    EXIT_OTHER,
    EXIT_TOO_LONG,
    TurnFigures,
)
from .jsonout import JsonOut
from .question import Question
from .render import Renderer

__all__ = ["Asker", "Chat", "Failed", "Mode", "Out", "Question", "Reader", "Source", "Steer"]

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


class Asker(Protocol):
    """Puts each call waiting for approval to the owner, and sends the answer."""

    async def ask(self, chat: Chat, needed: ApprovalNeeded) -> None: ...

    def answered(self, id: str) -> None:
        """The call was answered elsewhere (or timed out): take the question back."""


class Chat:
    """One chat: a session, and how its turns are sent and shown."""

    def __init__(
        self,
        socket: Path,
        session: SessionId,
        *,
        resume: bool,
        thinking: bool,
        mode: Mode,
        out: Out,
        err: Out,
        renderer: Renderer,
        json: JsonOut | None = None,
    ) -> None:
        self.socket, self.session = socket, session
        self.resume, self.thinking = resume, thinking
        self.mode = mode
        self.out, self.err, self.renderer = out, err, renderer
        self.json = json or JsonOut()
        self.figures: TurnFigures | None = None
        self.new_epoch = False  # the next turn opens a fresh epoch first (`/new-epoch`)
        self.turn_mode: SessionMode | None = None  # the next turn's own mode (`/plan`: read-only)
        self.pending_mode: SessionMode | None = None  # `--mode` for a session its turn makes
        self.asker: Asker | None = None  # none: this channel cannot ask the owner
        self.question: Question | None = None  # a question at the terminal stands
        self.line_closed: trio.Event | None = None  # the steering line is up until it is set
        self.steering = False  # a steering task reads the keys (and hands a question its own)
        self.sent: deque[TurnFrame] = deque(maxlen=16)  # its last turn frames (`watch.Others`)
        self.files: list[FileOffer] = []  # attached for the next message (`/attach`)
        self.on_screen = trio.Lock()  # its own turn is on screen: `watch.Others` waits for it
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
        """bxctl's own answer to a command: for the person, never among `--json` frames nor
        in `--say`'s answer."""
        stream = self.err if self.mode in ("json", "answer") else self.out
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
        if isinstance(final, WireError):  # the guess was wrong: the same frame, the other way
            if final.code is ErrorCode.NO_SUCH_SESSION and self.resume:
                final = await self._send(content, False)
            elif final.code is ErrorCode.SESSION_EXISTS and not self.resume:
                final = await self._send(content, True)
        self.new_epoch, self.turn_mode = False, None
        self.files.clear()  # carried by this turn, or refused with it: attach them again
        if not (isinstance(final, WireError) and final.code is ErrorCode.NO_SUCH_SESSION):
            self.resume = True
        if self.pending_mode is not None and self.resume:  # the session exists now
            from .undo_command import set_mode

            self.note(await set_mode(self.socket, self.session, self.pending_mode) or "")
            self.pending_mode = None
        return final

    async def _open(self) -> Channel:
        try:
            return await open_channel(self.socket)
        except ChannelError as error:
            raise Failed(EXIT_NO_LOOPD, "no_loopd", str(error)) from error

    def _frame(self, content: str, resume: bool, brk: Break | None = None) -> TurnFrame:
        new_epoch = self.new_epoch and brk is None
        frame = TurnFrame(
            session=self.session,
            content=content,
            resume=resume,
            thinking=self.thinking,
            break_=brk,
            new_epoch=new_epoch,
            can_ask=self.asker is not None,
            mode=None if brk is not None else self.turn_mode,
            files=() if brk is not None else tuple(self.files),
        )
        self.sent.append(frame)
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
        final: Frame | ChannelError
        async with trio.open_nursery() as asking:  # the questions put to the owner meanwhile
            try:
                final = await self._frames(source, resume, asking)
            except ChannelError as error:
                final = error
            asking.cancel_scope.cancel()
        if isinstance(final, ChannelError):
            raise Failed(EXIT_CONNECTION_LOST, "connection_lost", str(final)) from final
        return final  # type: ignore[return-value]

    async def _frames(self, source: Source, resume: bool, asking: trio.Nursery) -> Frame:
        holding = False
        try:
            while True:
                received = await source.receive()
                if self._quiet_retry(received, resume):
                    return received
                queued = isinstance(received, TurnEventFrame) and isinstance(
                    received.event, QueuedMessage
                )
                if not (holding or queued):  # its first frame past the mailbox
                    await self.on_screen.acquire()
                    holding = True
                self.show(received)
                if isinstance(received, TurnDoneFrame | WireError):
                    return received
                self.questions(received, asking)
        finally:
            if holding:
                self.on_screen.release()

    def questions(self, frame: Frame, asking: trio.Nursery) -> None:
        """A call of `frame`'s that waits for approval goes to the asker (in `asking`); one
        answered elsewhere, or timed out, is taken back."""
        if isinstance(frame, TurnEventFrame) and self.asker is not None:
            match frame.event:
                case ApprovalNeeded() as needed:
                    asking.start_soon(self.asker.ask, self, needed)
                case ApprovalAnswered(id=id):
                    self.asker.answered(id)

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

    def prompt(self, text: str) -> None:
        """A question of bxctl's own (or its answer), on the turn's own line."""
        if self.mode == "stream":
            self._write(self.renderer.end() + text)
        else:
            self.err.write(text)
            self.err.flush()

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
