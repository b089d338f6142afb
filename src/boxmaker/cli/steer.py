"""Steering a turn from `bxctl chat` at a terminal: what is typed while it runs.

While a turn runs, keys are not echoed and Ctrl-C is still a signal (`Keyboard`). The first
key typed opens the steering line — the line editor in its steering mode, which reads that
key and the ones after it — and the turn's text is held while the line is up (`Screen`) and
shown when it closes, so nothing is drawn through what the person types. What is sent from
the line goes to loopd on a connection of its own: Enter sends a soft break (the answer goes
on; the message waits, and the model reads it after its current step), Ctrl-C then Enter a
hard break (the answer stops at once; the message runs next). Ctrl-C with nothing typed
cancels the turn, as before, and withdraws what was sent during it (their connections close).

Turns are shown in the order loopd serves them: the running one, then a hard break's, then
the other messages' in the order they were sent. A message the running turn took is part of
that turn: its own connection's frames (the same turn's again) are not shown twice.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import trio

from ..client import Channel, ChannelError
from ..proto import (
    Break,
    Frame,
    MessageTaken,
    QueuedMessage,
    TurnDoneFrame,
    TurnEventFrame,
    WireError,
)
from .chat import Chat, Failed
from .commands import Message, interpret
from .editor import LineEditor, Steered
from .terminal import Keyboard, Screen

__all__ = ["Sent", "steered"]

END_WAIT_S = 5.0  # for the steering line to give the terminal back when the turn ends


_JOINED = object()  # the running turn took the message: what follows is that turn's


class Sent:
    """A message sent while a turn ran. Its connection is read at once (`read`): the frames
    of its own turn are kept until it is shown (it is then a `Source`), or, once the running
    turn took it, only the mark that it did."""

    def __init__(self, text: str, brk: Break, on_queued: Callable[[], None]) -> None:
        self.text = text
        self.brk = brk
        self.on_queued = on_queued
        self._send, self._frames = trio.open_memory_channel[object](math.inf)
        self._first: object = None

    async def read(self, channel: Channel) -> None:
        async with channel:
            try:
                events = 0
                while True:
                    frame = await channel.receive()
                    if isinstance(frame, TurnEventFrame):
                        if isinstance(frame.event, QueuedMessage):
                            self.on_queued()
                            continue
                        events += 1
                        if events == 1 and isinstance(frame.event, MessageTaken):
                            self._send.send_nowait(_JOINED)
                            return  # its frames now are the running turn's, shown there
                    self._send.send_nowait(frame)
                    if isinstance(frame, TurnDoneFrame | WireError):
                        return
            except ChannelError as error:
                self._send.send_nowait(error)

    async def joined(self) -> bool:
        """Whether the turn before took it (else its own turn's frames follow)."""
        self._first = await self._frames.receive()
        return self._first is _JOINED

    async def receive(self) -> Frame:
        item, self._first = self._first, None
        if item is None:
            item = await self._frames.receive()
        if isinstance(item, ChannelError):
            raise item
        return item  # type: ignore[return-value]


class _Steering:
    """The steering line's side of one steered turn (a task of its own)."""

    def __init__(
        self,
        chat: Chat,
        editor: LineEditor,
        keyboard: Keyboard,
        screens: tuple[Screen, ...],
        line: list[Sent],
        cancel: Callable[[], None],
        nursery: trio.Nursery,
    ) -> None:
        self.chat, self.editor, self.keyboard = chat, editor, keyboard
        self.screens, self.line, self.cancel, self.nursery = screens, line, cancel, nursery
        self.carry = ""  # text for the next prompt
        self.ended = False
        self.up = False  # the steering line is up (or its thread starting)
        self.done = trio.Event()
        self._waiting = trio.CancelScope()

    async def run(self) -> None:
        self.chat.steering = True
        try:
            while not self.ended:
                with self._waiting:
                    await self.keyboard.typed()
                if self.ended:
                    break
                if (question := self.chat.question) is not None:
                    question.give(os.read(self.keyboard.fd, 16))  # it answers an approval
                elif not await self._line():
                    break
                self._waiting = trio.CancelScope()
        finally:
            self.chat.steering = False
            self.done.set()

    async def _line(self) -> bool:
        """The steering line, up until it gives its text; whether to go on watching."""
        renderer = self.chat.renderer
        self.chat.pause()
        tty, renderer.tty = renderer.tty, False  # no live status line while held
        for screen in self.screens:
            screen.hold()
        self.up = True
        closed = self.chat.line_closed = trio.Event()
        try:  # not abandoned on a cancel: the line gives the terminal back first
            steered = await trio.to_thread.run_sync(self.editor.steer)
        finally:
            self.up = False
            self.chat.line_closed = None
            closed.set()
            renderer.tty = tty
            for screen in self.screens:
                screen.release()
        return await self._act(steered)

    async def _act(self, steered: Steered) -> bool:
        match steered:
            case Steered(kind="cancel"):
                self.cancel()
                return False
            case Steered(kind="unsent", text=text):
                self.carry = text
            case Steered(kind="soft" | "hard", text=text):
                if self.ended:  # the turns ended as it was sent: the next prompt has it
                    self.carry = text
                else:
                    await self._send(text, Break.HARD if steered.kind == "hard" else Break.SOFT)
            case Steered(kind="closed"):
                return False
        return not self.ended

    async def _send(self, text: str, brk: Break) -> None:
        match interpret(text):
            case Message(text=message):
                pass
            case None:
                return
            case _:
                self.chat.status("commands wait for the turn to end; it stands at the prompt")
                self.carry = text
                return
        try:
            channel = await self.chat.send_break(message, brk)
        except Failed as failure:
            self.chat.status(f"not sent: {failure}")
            return
        if brk is Break.HARD:
            self.chat.status("stopping the answer: this message runs next")
        sent = Sent(message, brk, lambda: self._queued(brk))
        self.nursery.start_soon(sent.read, channel)
        if brk is Break.HARD:  # in front of every message that is not a hard break, as loopd
            self.line.insert(sum(1 for s in self.line if s.brk is Break.HARD), sent)
        else:
            self.line.append(sent)

    def _queued(self, brk: Break) -> None:
        """loopd has the message in the session's mailbox."""
        if brk is Break.SOFT:
            self.chat.status("queued: the model reads it after its current step")

    def end(self) -> None:
        """The turns are over (or cancelled): stop watching, and a steering line that is up
        gives back what stands typed."""
        self.ended = True
        self._waiting.cancel()
        if self.up:
            self.editor.end_steering()


async def steered(
    chat: Chat,
    text: str,
    cancel: Callable[[], None],
    *,
    editor: LineEditor,
    keyboard: Keyboard,
    screens: tuple[Screen, ...],
) -> tuple[int, str]:
    """Run the turn for `text`, and those of the messages typed while it runs, showing each
    in loopd's order; the last one's exit code and the text left typed for the next prompt.
    `cancel` cancels the whole (Ctrl-C on an empty steering line)."""
    line: list[Sent] = []
    with keyboard.quiet():
        async with trio.open_nursery() as nursery:
            steering = _Steering(chat, editor, keyboard, screens, line, cancel, nursery)
            nursery.start_soon(steering.run)
            try:
                code = await chat.turn(text)
                while line:
                    sent = line.pop(0)
                    if await sent.joined():
                        continue
                    if sent.brk is Break.SOFT:
                        chat.status("the turn ended before a step could take it: it runs now")
                    code = await chat.turn(sent.text, sent)
            finally:
                steering.end()
                with trio.move_on_after(END_WAIT_S) as waiting:
                    waiting.shield = True
                    await steering.done.wait()
                nursery.cancel_scope.cancel()  # withdraw what is left unsent or unshown
    return code, steering.carry
