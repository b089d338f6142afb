"""The frames waiting for one channel, and the task that writes them.

Frames are encoded as they are queued (the connection's codec checks each against where the
connection is), counted in bytes, and written by one task, every frame ready in one write, a
piece at a time. A frame that finds nothing waiting on a socket the channel keeps up with is
written at once, without waking that task: at a real server's pace each token comes alone,
and the hand-off cost more than the rest of its way (docs/benchmarks.md, "Where a lone chunk's
time goes"). Frames queued less than `CORK_S` after such a write wait for the task instead, so
a burst of them still goes out in one write.

A channel that does not read is seen at once: past `MAX_QUEUED` bytes waiting, or when it
takes nothing for `[channel] write_timeout_s`, it is dropped (its connection's scope
cancelled: a turn it holds is cancelled as if it had left; a watch, or a detached turn's
channel, just ends). Nothing a peer does blocks the one who queues.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os

import trio

from ..channel import LoopdConnection, Sending
from ..proto import Frame, TurnEvent, TurnEventFrame

__all__ = ["CORK_S", "MAX_QUEUED", "PIECE", "Outbox"]

log = logging.getLogger("loopd")

MAX_QUEUED = 4 * 1024 * 1024  # bytes of frames waiting for one channel
PIECE = 64 * 1024  # written at a time: a channel must take one within the write timeout
CORK_S = 100e-6  # after a frame written at once, how long the next ones wait for the writer


class Outbox:
    """One connection's frames on their way out; `queued` counts their bytes."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        connection: LoopdConnection,
        write_timeout: float,
        scope: trio.CancelScope,
        who: str,
    ) -> None:
        self._stream, self._connection, self._who = stream, connection, who
        self._write_timeout, self._scope = write_timeout, scope
        self._send, self._receive = trio.open_memory_channel[bytes](math.inf)
        self._written = trio.Event()
        # The socket a frame may be written to at once (its fileno is -1 once it is closed,
        # so its number, which the system may have given another file, is never used).
        self._socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._at_once = -math.inf  # when a frame was last written at once
        self.queued = 0
        self.dropped = False
        self.closed = False  # its final frame is queued (or it was closed): nothing more

    def event(self, event: TurnEvent) -> None:
        self.put(TurnEventFrame(event=event))

    def put(self, frame: Frame) -> None:
        """Queue a frame (a final one closes the queue: `flushed` then waits for it)."""
        if self.closed:
            return
        data = self._connection.send(frame)
        if self._connection.state is Sending.DONE:  # the final frame: bounded by the answer,
            self._queue(data)  # it is never a reason to drop the channel
            self.close()
        else:
            self.put_encoded(data)

    def close(self) -> None:
        """Nothing more will be queued: the writer ends once what is queued is written."""
        self.closed = True
        self._send.close()

    def put_encoded(self, data: bytes) -> None:
        """Queue bytes already encoded as frames (a watch's: one encoding for every watcher).
        Once the outbox is closed or dropped, nothing is kept: it never raises for that."""
        if self.dropped or self.closed:
            return
        self._queue(data)
        if self.queued > MAX_QUEUED:
            self._drop(f"{self.queued} bytes of frames wait for it, more than {MAX_QUEUED}")

    def _queue(self, data: bytes) -> None:
        if not self.dropped:
            if not self.queued and self._socket is not None:
                data = data[self._write_at_once(data) :]
                if not data:
                    return
            self.queued += len(data)
            self._send.send_nowait(data)

    def _write_at_once(self, data: bytes) -> int:
        """How much of `data` the socket took without waiting (nothing is queued, so nothing
        is being written): none when a frame went this way less than `CORK_S` ago (it is one
        of a burst, which the writer sends whole), the socket is full or closed, or writing
        failed (the writer then meets the failure as it always did)."""
        assert self._socket is not None
        now = trio.current_time()
        fd = self._socket.fileno()
        if now - self._at_once < CORK_S or fd < 0:
            return 0
        self._at_once = now
        try:
            return os.write(fd, data)  # the socket does not block: trio made it so
        except OSError:
            return 0

    async def final(self, frame: Frame) -> None:
        """Queue the final frame and wait until everything is written."""
        self.put(frame)
        await self.flushed()

    async def flushed(self) -> None:
        await self._written.wait()

    def _drop(self, why: str) -> None:
        log.warning("%s: the channel is not reading: %s; dropping it", self._who, why)
        self.dropped = True
        self._scope.cancel()

    async def write(self) -> None:
        """Write what is queued, every frame ready in one write, a piece at a time."""
        async for first in self._receive:
            batch = [first]
            with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
                while True:
                    batch.append(self._receive.receive_nowait())
            data = memoryview(b"".join(batch))
            batch.clear()  # the joined copy alone is held while it is written
            for start in range(0, len(data), PIECE):
                piece = data[start : start + PIECE]
                with trio.move_on_after(self._write_timeout) as waiting:
                    await self._stream.send_all(piece)
                if waiting.cancelled_caught:
                    self._drop(f"it took nothing for {self._write_timeout:g} s")
                    return
                self.queued -= len(piece)  # what waits is what is not written yet
        self._written.set()
