"""The `loop.sock` server: a trio nursery task per connection, one turn per connection.

A connection sends one `turn` frame and reads frames until one is final. While the turn runs,
its events are written as they come (several ready frames go out in one write), and the
connection is watched for the channel's end of file: if the channel closes before the final
frame, the turn is cancelled (its HTTP stream closed, nothing appended for the unfinished
completion). A bad frame gets `error bad_frame` saying what was wrong; so does anything sent
after the turn frame (the turn is cancelled). Nothing a peer does reaches past its own
connection: loopd keeps serving the others.

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

from ..channel import END, NEED_DATA, BadFrame, FrameDecoder, encode_frame, split_frame
from ..proto import ErrorCode, Frame, TurnEventFrame, TurnFrame, WireError, frame_kind
from .listener import UnixListener
from .service import Daemon

__all__ = ["MAX_QUEUED", "ChannelServer", "handle_connection"]

log = logging.getLogger("loopd")

FIRST_FRAME_TIMEOUT_S = 30.0
MAX_QUEUED = 4 * 1024 * 1024  # bytes of frames waiting for one channel
PIECE = 64 * 1024  # written at a time: a channel must take one within the write timeout


class ChannelServer:
    """Accepts connections until told to stop; then lets running turns finish for a grace
    period and cancels what is left."""

    def __init__(self, daemon: Daemon, *, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S):
        self.daemon = daemon
        self.first_frame_timeout = first_frame_timeout
        self._accepting = trio.CancelScope()
        self._grace = 0.0
        self.connections = 0  # open now

    def status(self) -> str:
        """One line on what loopd is doing (SIGUSR1)."""
        return f"{self.connections} connections; {self.daemon.status()}"

    def stop(self, grace: float) -> None:
        """Stop accepting; running turns get `grace` seconds to finish."""
        self._grace = grace
        self._accepting.cancel()

    async def serve(
        self,
        listener: UnixListener,
        *,
        task_status: trio.TaskStatus[list[UnixListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until `stop()`; the socket file is removed once no longer listening (if it
        is still the one bound).

        `trio.serve_listeners` accepts (pausing while the process is out of file descriptors:
        that is loopd's own limit, not a peer's fault, and the peers wait in the backlog); the
        connections run in a nursery of their own, which outlives the accepting by the grace.
        """
        async with trio.open_nursery() as connections:
            try:
                with self._accepting:
                    await trio.serve_listeners(
                        self._handle, [listener], handler_nursery=connections,
                        task_status=task_status,
                    )  # fmt: skip
            finally:
                await listener.aclose()
            connections.cancel_scope.deadline = trio.current_time() + self._grace

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        try:
            await handle_connection(stream, self.daemon, self.first_frame_timeout)
        finally:
            self.connections -= 1


async def handle_connection(
    stream: trio.abc.Stream, daemon: Daemon, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S
) -> None:
    """Serve one connection: one turn frame in, its frames out. Never raises what a peer did."""
    write_timeout = daemon.config.channel.write_timeout_s
    try:
        decoder = FrameDecoder()
        first: Frame | BadFrame | None = BadFrame(
            f"no frame within {first_frame_timeout:g} s of connecting"
        )
        with trio.move_on_after(first_frame_timeout):
            first = await _read_frame(stream, decoder)
        if first is None:
            return  # connected and left without a word
        if isinstance(first, TurnFrame) and decoder.buffered():
            first = BadFrame(_MORE)
        if isinstance(first, BadFrame):
            with trio.move_on_after(write_timeout):
                await stream.send_all(encode_frame(WireError(ErrorCode.BAD_FRAME, first.reason)))
            return
        if not isinstance(first, TurnFrame):
            kind = frame_kind(first)
            message = f"a {kind!r} frame is sent by loopd, not to it; send a 'turn' frame"
            with trio.move_on_after(write_timeout):
                await stream.send_all(encode_frame(WireError(ErrorCode.BAD_FRAME, message)))
            return
        await _run(stream, decoder, daemon, first)
    except* (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the channel went away; its turn, if any, was cancelled
    except* Exception:
        log.exception("connection failed")
    finally:
        with trio.move_on_after(1) as cleanup:
            cleanup.shield = True
            await stream.aclose()


_MORE = (
    "more was sent after the turn frame; a connection carries one turn frame, then only reads "
    "(the turn is not run, or is cancelled)"
)


async def _read_frame(stream: trio.abc.Stream, decoder: FrameDecoder) -> Frame | BadFrame | None:
    """The next frame, a bad one, or None when the stream ended cleanly first."""
    while True:
        frame = decoder.next_frame()
        if frame is END:
            return None
        if frame is NEED_DATA:
            decoder.receive_data(await stream.receive_some())
            continue
        return frame  # type: ignore[return-value]


class _Outbox:
    """The frames waiting for one channel, encoded as they are queued (split where too long);
    `queued` counts their bytes, so a channel that does not read is seen at once."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[bytes](math.inf)
        self.queued = 0

    def put(self, frame: Frame) -> bool:
        """Queue `frame`; False once more than `MAX_QUEUED` bytes wait."""
        data = b"".join(_encoded(part) for part in split_frame(frame))
        self.queued += len(data)
        self.send.send_nowait(data)
        return self.queued <= MAX_QUEUED

    def take(self, first: bytes) -> bytes:
        """`first` and every other frame ready, as one write."""
        batch = [first]
        with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
            while True:
                batch.append(self.receive.receive_nowait())
        data = b"".join(batch)
        self.queued -= len(data)
        return data


async def _run(
    stream: trio.abc.Stream, decoder: FrameDecoder, daemon: Daemon, turn: TurnFrame
) -> None:
    """Run the turn in this task (it starts at once), its frames written by a child."""
    write_timeout = daemon.config.channel.write_timeout_s
    outbox = _Outbox()
    written = trio.Event()
    final_queued = more_came = False
    running = trio.CancelScope()  # the turn alone: its channel may still be told why it ended

    def on_event(event: object) -> None:
        if not outbox.put(TurnEventFrame(event=event)):  # type: ignore[arg-type]
            drop(f"{outbox.queued} bytes of frames wait for it, more than {MAX_QUEUED}")

    async def deliver(final: Frame) -> None:
        nonlocal final_queued
        final_queued = True
        with outbox.send:
            outbox.put(final)
        await written.wait()

    def drop(why: str) -> None:
        log.warning("turn %s: the channel is not reading: %s; dropping it", turn.session, why)
        nursery.cancel_scope.cancel()

    async def write() -> None:
        async for first in outbox.receive:
            data = memoryview(outbox.take(first))
            for start in range(0, len(data), PIECE):
                with trio.move_on_after(write_timeout) as waiting:
                    await stream.send_all(data[start : start + PIECE])
                if waiting.cancelled_caught:
                    drop(f"it took nothing for {write_timeout:g} s")
                    return
        written.set()

    async def watch() -> None:
        """After its turn frame the channel only reads: its end of file cancels the turn, and
        anything it sends ends the turn with `bad_frame`."""
        nonlocal more_came
        if not await stream.receive_some():
            nursery.cancel_scope.cancel()  # it left: there is no one to tell
        elif not final_queued:
            more_came = True
            running.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        nursery.start_soon(watch)
        with running:
            await daemon.turn(turn, on_event, deliver)
        if more_came and not final_queued:
            await deliver(WireError(ErrorCode.BAD_FRAME, _MORE))
        nursery.cancel_scope.cancel()  # the final frame is out: stop watching


def _encoded(frame: Frame) -> bytes:
    try:
        return encode_frame(frame)
    except ValueError as exc:  # split_frame fits every text; anything else is loopd's bug
        log.error("a %s frame could not be sent: %s", frame_kind(frame), exc)
        final = not isinstance(frame, TurnEventFrame)
        return encode_frame(WireError(ErrorCode.INTERNAL, str(exc))) if final else b""
