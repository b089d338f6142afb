"""The `loop.sock` server: a trio nursery task per connection, one turn per connection.

A connection sends one `turn` frame and reads frames until one is final. While the turn runs,
its events are written as they come (several ready frames go out in one write), and the
connection is watched for the channel's end of file: if the channel closes before the final
frame, the turn is cancelled (its HTTP stream closed, nothing appended for the unfinished
completion). A bad frame gets `error bad_frame` saying what was wrong; so does anything sent
after the turn frame (the turn is cancelled). What a connection may carry, each way, is the
codec's rule (`channel.LoopdConnection`); this is the I/O around it. Nothing a peer does
reaches past its own connection: loopd keeps serving the others.

Nothing a peer does holds loopd's memory or a turn for long either: the frames waiting for a
channel are bounded (`MAX_QUEUED` bytes), and a channel that takes none of its frames for
`[channel] write_timeout_s` is dropped, its turn cancelled as if it had left. Text too long
for one frame goes out over several (`channel.split_frame`). The socket itself is
`listener.py`'s.
"""

from __future__ import annotations

import contextlib
import logging
import math

import trio

from ..channel import END, MORE_AFTER_TURN, NEED_DATA, BadFrame, LoopdConnection, Request, Sending
from ..proto import (
    ApprovalDoneFrame,
    ApprovalFrame,
    ErrorCode,
    Frame,
    ListApprovalsFrame,
    TurnDoneFrame,
    TurnEvent,
    TurnEventFrame,
    TurnFrame,
    WaitingFrame,
    WireError,
)
from ..sansio import Signal
from ..serving import SocketServer
from .service import Daemon

__all__ = ["MAX_QUEUED", "ChannelServer", "handle_connection"]

log = logging.getLogger("loopd")

FIRST_FRAME_TIMEOUT_S = 30.0
MAX_QUEUED = 4 * 1024 * 1024  # bytes of frames waiting for one channel
PIECE = 64 * 1024  # written at a time: a channel must take one within the write timeout


class ChannelServer(SocketServer):
    """`loop.sock`'s connections, each served by `handle_connection`."""

    def __init__(self, daemon: Daemon, *, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S):
        super().__init__()
        self.daemon = daemon
        self.first_frame_timeout = first_frame_timeout

    def status(self) -> str:
        """One line on what loopd is doing (SIGUSR1)."""
        return f"{self.connections} connections; {self.daemon.status()}"

    async def handle(self, stream: trio.SocketStream) -> None:
        await handle_connection(stream, self.daemon, self.first_frame_timeout)


async def handle_connection(
    stream: trio.abc.Stream, daemon: Daemon, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S
) -> None:
    """Serve one connection: one turn frame in, its frames out. Never raises what a peer did."""
    connection = LoopdConnection()
    try:
        first: Request | BadFrame | Signal = BadFrame(
            f"no frame within {first_frame_timeout:g} s of connecting"
        )
        with trio.move_on_after(first_frame_timeout):
            first = await _next_event(stream, connection)
        if first is END:
            return  # connected and left without a word
        if isinstance(first, TurnFrame):
            await _run(stream, connection, daemon, first)
        elif isinstance(first, ApprovalFrame | ListApprovalsFrame):
            with trio.move_on_after(daemon.config.channel.write_timeout_s):
                await stream.send_all(connection.send(_answer(daemon, first)))
        elif isinstance(first, BadFrame):
            with trio.move_on_after(daemon.config.channel.write_timeout_s):
                await stream.send_all(connection.refuse(first))
    except* (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the channel went away; its turn, if any, was cancelled
    except* Exception:
        log.exception("connection failed")
    finally:
        with trio.move_on_after(1) as cleanup:
            cleanup.shield = True
            await stream.aclose()


async def _next_event(
    stream: trio.abc.Stream, connection: LoopdConnection
) -> Request | BadFrame | Signal:
    """The connection's next event, reading as much as it takes (never `NEED_DATA`)."""
    while (event := connection.next_event()) is NEED_DATA:
        connection.receive_data(await stream.receive_some())
    return event


def _answer(daemon: Daemon, frame: ApprovalFrame | ListApprovalsFrame) -> Frame:
    """A connection's other requests: the owner's answer to a waiting call, or the list of
    what waits."""
    approvals = daemon.runtime.approvals
    if isinstance(frame, ListApprovalsFrame):
        return WaitingFrame(approvals.waiting())
    if approvals.answer(frame.id, frame.answer):
        log.info("approval %s: answered %s", frame.id, frame.answer.value)
        return ApprovalDoneFrame(frame.id)
    return WireError(
        ErrorCode.NO_SUCH_APPROVAL,
        f"no call waits for an answer as {frame.id!r} (it was answered, or timed out)",
    )


async def _run(
    stream: trio.abc.Stream, connection: LoopdConnection, daemon: Daemon, turn: TurnFrame
) -> None:
    """Run the turn in this task (it starts at once), its frames written by a child while a
    second child watches the channel: its end of file cancels everything (there is no one
    to tell), and anything it sends ends the turn with `bad_frame`."""
    async with trio.open_nursery() as nursery:
        timeout = daemon.config.channel.write_timeout_s
        outbox = _Outbox(stream, connection, timeout, nursery, f"turn {turn.session}")
        running = trio.CancelScope()  # the turn alone: its channel may still be told why
        nursery.start_soon(outbox.write)
        nursery.start_soon(_watch, stream, connection, running, nursery.cancel_scope)
        with running:
            await daemon.turn(turn, outbox.event, outbox.final)
        if connection.more_after_turn and connection.state is not Sending.DONE:
            await outbox.final(WireError(ErrorCode.BAD_FRAME, MORE_AFTER_TURN))
        nursery.cancel_scope.cancel()  # the final frame is out: stop watching


async def _watch(
    stream: trio.abc.Stream,
    connection: LoopdConnection,
    turn: trio.CancelScope,
    everything: trio.CancelScope,
) -> None:
    event = await _next_event(stream, connection)
    if event is END:
        everything.cancel()  # it left: there is no one to tell
    elif connection.state is not Sending.DONE:
        turn.cancel()  # it sent more (`more_after_turn`): the turn ends with bad_frame


class _Outbox:
    """The frames waiting for one channel, as the connection encodes them; `queued` counts
    their bytes, so a channel that does not read is seen at once and dropped (its turn
    cancelled) past `MAX_QUEUED` bytes, or when it takes nothing for `write_timeout`."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        connection: LoopdConnection,
        write_timeout: float,
        nursery: trio.Nursery,
        who: str,
    ) -> None:
        self._stream, self._connection, self._who = stream, connection, who
        self._write_timeout, self._nursery = write_timeout, nursery
        self._send, self._receive = trio.open_memory_channel[bytes](math.inf)
        self._written = trio.Event()
        self.queued = 0

    def event(self, event: TurnEvent) -> None:
        self._put(TurnEventFrame(event=event))
        if self.queued > MAX_QUEUED:
            self._drop(f"{self.queued} bytes of frames wait for it, more than {MAX_QUEUED}")

    async def final(self, frame: TurnDoneFrame | WireError) -> None:
        """Queue the final frame and wait until everything is written."""
        with self._send:
            self._put(frame)
        await self._written.wait()

    def _put(self, frame: Frame) -> None:
        data = self._connection.send(frame)
        self.queued += len(data)
        self._send.send_nowait(data)

    def _drop(self, why: str) -> None:
        log.warning("%s: the channel is not reading: %s; dropping it", self._who, why)
        self._nursery.cancel_scope.cancel()

    async def write(self) -> None:
        """Write what is queued, every frame ready in one write, a piece at a time."""
        async for first in self._receive:
            batch = [first]
            with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
                while True:
                    batch.append(self._receive.receive_nowait())
            data = memoryview(b"".join(batch))
            self.queued -= len(data)
            for start in range(0, len(data), PIECE):
                with trio.move_on_after(self._write_timeout) as waiting:
                    await self._stream.send_all(data[start : start + PIECE])
                if waiting.cancelled_caught:
                    self._drop(f"it took nothing for {self._write_timeout:g} s")
                    return
        self._written.set()
