"""The gateway's watch on its rooms' sessions (`watch {sessions, can_ask}` on `loop.sock`):
every turn of those sessions, whoever started it (the owner in the room, a schedule, a
terminal), shown in the session's room (`showing.Showing`), and every question for the owner
posted there (`approval_needed`).

The watch is opened again when the rooms' sessions change, and when loopd comes back. Each
time it is in place, the owner's messages loopd has but the gateway has not answered
(`state.pending`) are asked about again (`Desk.reconcile`): a turn that ended while nobody
watched is answered from loopd's `duplicate`, and the questions that wait are posted again
(`list_approvals`; a question's key is its id, so one posted already is not posted twice).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ..client import Channel, ChannelError, open_channel
from ..proto import (
    ApprovalAnswered,
    ApprovalNeeded,
    Content,
    Origin,
    SessionId,
    ToolCallStarted,
    TurnDoneFrame,
    TurnDonePartFrame,
    TurnEventFrame,
    TurnFrame,
    WatchEventFrame,
    WatchFrame,
    WatchingFrame,
    WireError,
)
from .words import ended, tool_line

if TYPE_CHECKING:
    from .desk import Desk

__all__ = ["watch"]

log = logging.getLogger("gatewayd")

RETRY_S = 2.0  # between tries to open the watch while loopd is away
LOST_SIGHT = "(The gateway lost sight of this turn before its end; `bxctl show` has the rest.)"


class Turns:
    """The turn each watched session is in, as its frames come."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk
        self.running: dict[str, str] = {}  # session -> the key of its turn's Showing
        self.anonymous: set[str] = set()  # keys of turns with no origin (a terminal's)
        self.parts: dict[str, list[str]] = {}  # session -> a long turn_done's parts

    def _showing(self, room: str, origin: Origin | None, *, late: bool) -> str:
        key = self.desk.showing_for(room, origin, late=late).key
        if origin is None:
            self.anonymous.add(key)
        return key

    def close(self) -> None:
        """The watch ended. A turn with an origin is shown on by the next watch (its Showing is
        found by its origin) or by loopd's `duplicate`; one without can be found by neither,
        so it ends here with what came."""
        for key in self.running.values():
            showing = self.desk.showings.get(key)
            if key in self.anonymous and showing is not None and not showing.done:
                showing.end(None, LOST_SIGHT)

    def take(self, event: WatchEventFrame) -> None:
        desk, sid, frame = self.desk, str(event.session), event.frame
        room = desk.state.room_of(sid)
        if room is None:
            return
        key = self.running.get(sid)
        if isinstance(frame, TurnFrame):
            if key is not None:  # a soft break taken into the running turn
                if frame.origin is not None and frame.origin.channel == "matrix":
                    desk.joined(frame.origin.id, key)
                return
            key = self.running[sid] = self._showing(room, event.origin, late=False)
            return
        if key is None:  # a turn heard from its middle (the watch opened while it ran)
            key = self.running[sid] = self._showing(room, event.origin, late=True)
        showing = desk.showings[key]
        if isinstance(frame, TurnEventFrame):
            inner = frame.event
            if isinstance(inner, Content):
                showing.add(inner.text)
            elif isinstance(inner, ToolCallStarted):
                showing.tool(tool_line(inner.name, inner.summary))
            elif isinstance(inner, ApprovalNeeded):
                desk.ask_owner(room, inner)
            elif isinstance(inner, ApprovalAnswered):
                desk.answered(inner.id)
            return
        if isinstance(frame, TurnDonePartFrame):
            self.parts.setdefault(sid, []).append(frame.content)
            return
        del self.running[sid]
        if isinstance(frame, TurnDoneFrame):
            showing.end("".join([*self.parts.pop(sid, []), frame.content]))
        elif isinstance(frame, WireError):
            self.parts.pop(sid, None)
            showing.end(None, ended(frame))


async def watch(
    desk: Desk, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Keep a watch on the rooms' sessions for as long as the gateway runs."""
    task_status.started()
    while True:
        sessions = desk.state.sessions()
        if not sessions:
            await desk.sessions_changed.wait()
            continue
        changed = desk.sessions_changed
        try:
            await _watch_once(desk, sessions, changed)
        except ChannelError as error:
            desk.watch_lost(str(error))
            with trio.move_on_after(RETRY_S):
                await changed.wait()


async def _watch_once(desk: Desk, sessions: tuple[str, ...], changed: trio.Event) -> None:
    channel = await open_channel(desk.socket)
    async with channel:
        await channel.send(WatchFrame(tuple(SessionId(s) for s in sessions), can_ask=True))
        first = await channel.receive()
        if not isinstance(first, WatchingFrame):
            said = first.message if isinstance(first, WireError) else type(first).__name__
            raise ChannelError(f"loopd did not take the watch: {said}")
        turns = Turns(desk)
        try:
            await _read(channel, turns, desk, sessions, changed)
        finally:
            turns.close()


async def _read(
    channel: Channel, turns: Turns, desk: Desk, sessions: tuple[str, ...], changed: trio.Event
) -> None:
    """The watch's frames, until the rooms' sessions change (or the watch is lost: raised)."""
    lost: ChannelError | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until, changed, nursery.cancel_scope)
        desk.watching(sessions, nursery)
        try:
            while True:
                frame = await channel.receive()
                if isinstance(frame, WatchEventFrame):
                    turns.take(frame)
                elif isinstance(frame, WireError):
                    raise ChannelError(f"loopd ended the watch: {frame.message}")
        except ChannelError as error:
            lost = error
            nursery.cancel_scope.cancel()
    if lost is not None:
        raise lost


async def _until(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
