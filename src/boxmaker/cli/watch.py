"""Watching sessions: `bxctl watch SESSION...` prints every turn of those sessions as it
streams, whoever started it (another terminal, the gateway, a schedule), and puts their
questions for the owner at the terminal; a chat at its prompt shows, the same way, the turns
other channels start in its session (`Others`).

Each session's turns are shown by a `Chat` of its own (its renderer keeps one turn's line),
headed by the message that started the turn and where it came from. A chat's own turns are
known by their frames (the watch gives the turn frame that started each turn): they are
shown by the chat itself, not twice.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import trio

from ..client import ChannelError, open_channel
from ..proto import (
    ErrorCode,
    Origin,
    SessionId,
    TurnEventFrame,
    TurnFrame,
    WatchEventFrame,
    WatchFrame,
    WatchingFrame,
    WireError,
    dumps,
)
from .chat import Chat
from .render import Renderer, escape_controls

__all__ = ["Above", "Others", "Shown", "watch"]


def origin_text(origin: Origin | None) -> str:
    return "no origin" if origin is None else escape_controls(str(origin))


class Shown:
    """A watch's frames for one session, shown through `chat` (its asker answers the
    questions); `own` says which turn frames are the chat's own (not shown here)."""

    def __init__(self, chat: Chat, own: Callable[[TurnFrame], bool] = lambda _: False) -> None:
        self.chat = chat
        self.own = own
        self.showing = False  # in a turn that is shown here

    def take(self, event: WatchEventFrame, asking: trio.Nursery) -> None:
        inner, chat = event.frame, self.chat
        if isinstance(inner, TurnFrame):
            if self.own(inner):
                self.showing = False
                return
            said = escape_controls(inner.content)
            taken = self.showing  # a soft break's message, taken into the turn shown
            chat.status(f"{'taken' if taken else 'a turn'} from {origin_text(event.origin)}")
            chat.note(f"> {said}")
            self.showing = True
            return
        if isinstance(inner, WireError) and inner.code is ErrorCode.INTERRUPTED:
            chat.status(f"the last turn (from {origin_text(event.origin)}) was interrupted")
            return
        if not self.showing:
            return
        chat.show(inner)
        chat.questions(inner, asking)
        if not isinstance(inner, TurnEventFrame):
            self.showing = False  # its final frame


async def watch(
    socket: Path, sessions: tuple[SessionId, ...], make: Callable[[SessionId], Chat], as_json: bool
) -> str:
    """Show every turn of `sessions` until loopd ends the watch; why it ended.

    Raises:
        ChannelError: no loopd, or the watch was refused.
    """
    chats = {sid: make(sid) for sid in sessions}
    can_ask = any(chat.asker is not None for chat in chats.values())
    channel = await open_channel(socket)
    async with channel, trio.open_nursery() as asking:
        await channel.send(WatchFrame(sessions, can_ask=can_ask))
        first = await channel.receive()
        if not isinstance(first, WatchingFrame):
            why = first.message if isinstance(first, WireError) else repr(first)
            raise ChannelError(f"loopd refused the watch: {why}")
        shown = {sid: Shown(chat) for sid, chat in chats.items()}
        said = next(iter(chats.values())).err
        said.write(f"watching {', '.join(sid.value for sid in sessions)}\n")
        said.flush()
        while True:
            try:
                frame = await channel.receive()
            except ChannelError:
                asking.cancel_scope.cancel()
                return "loopd ended the watch (it stopped)"
            if as_json:
                first_chat = next(iter(chats.values()))
                first_chat.out.write(dumps(frame).decode() + "\n")
                first_chat.out.flush()
            elif isinstance(frame, WatchEventFrame) and frame.session in shown:
                shown[frame.session].take(frame, asking)


class Above:
    """Text for the terminal, written a whole line at a time above the line editor's prompt
    (`LineEditor.above`), which is drawn again below it."""

    def __init__(self, above: Callable[[str, TextIO], None], stream: TextIO) -> None:
        self._above, self._stream = above, stream
        self._line = ""

    def write(self, text: str, /) -> int:
        whole, newline, self._line = (self._line + text).rpartition("\n")
        if newline:
            self._above(whole + newline, self._stream)
        return len(text)

    def flush(self) -> None:
        pass


class Others:
    """The turns other channels start in a chat's session, shown while it waits at its
    prompt (the chat's own are those among the turn frames it sent last: `Chat.sent`),
    through `above` when a line editor holds the terminal."""

    def __init__(self, chat: Chat, above: Callable[[str, TextIO], None] | None = None) -> None:
        self.chat = chat
        self._above = above
        self._scope = trio.CancelScope()

    def own(self, frame: TurnFrame) -> bool:
        if frame in self.chat.sent:
            self.chat.sent.remove(frame)
            return True
        return False

    async def show(self, shown: Shown, frame: WatchEventFrame, asking: trio.Nursery) -> None:
        """Show another turn's frame once the chat's own turn is off the screen."""
        async with self.chat.on_screen:
            shown.take(frame, asking)

    def restart(self) -> None:
        """The chat moved to another session: watch that one."""
        self._scope.cancel()

    async def run(self) -> None:
        """Watch the chat's session (again after each `restart`); nothing is said when loopd
        cannot watch (an older loopd, or too many watches)."""
        while True:
            self._scope = trio.CancelScope()
            with self._scope:
                await self._watch(self.chat.session)
            if not self._scope.cancelled_caught:
                return

    async def _watch(self, sid: SessionId) -> None:
        out, err, tty = self.chat.out, self.chat.err, self.chat.renderer.tty
        if self._above is not None:  # whole lines, above the prompt: no live status line
            out, err, tty = Above(self._above, sys.stdout), Above(self._above, sys.stderr), False
        other = Chat(
            self.chat.socket,
            sid,
            resume=True,
            thinking=True,
            mode=self.chat.mode,
            out=out,
            err=err,
            renderer=Renderer(
                tty=tty, color=self.chat.renderer.color, width=self.chat.renderer.width
            ),
        )
        shown = Shown(other, self.own)
        try:
            channel = await open_channel(self.chat.socket)
        except ChannelError:
            return
        async with channel, trio.open_nursery() as asking:
            try:
                await channel.send(WatchFrame((sid,)))
                if not isinstance(await channel.receive(), WatchingFrame):
                    return
                while True:
                    frame = await channel.receive()
                    if isinstance(frame, WatchEventFrame):
                        await self.show(shown, frame, asking)
            except ChannelError:
                return
