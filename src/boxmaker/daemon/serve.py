"""The `loop.sock` server: a trio nursery task per connection, one turn per connection.

A connection sends one `turn` frame and reads frames until one is final. While the turn runs,
its events are written as they come (several ready frames go out in one write), and the
connection is watched for the channel's end of file: if the channel closes before the final
frame, the turn is cancelled (its HTTP stream closed, nothing appended for the unfinished
completion). A bad frame gets `error bad_frame` saying what was wrong. Nothing a peer does
reaches past its own connection: loopd keeps serving the others.

The socket is created mode 0600 in a folder made 0700. A stale socket file with no listener
is replaced; a live one (another loopd) is refused.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket as stdlib_socket
from pathlib import Path

import trio

from ..channel import END, NEED_DATA, BadFrame, FrameDecoder, encode_frame
from ..proto import ErrorCode, Frame, TurnEventFrame, TurnFrame, WireError, frame_kind
from .service import Daemon

__all__ = ["AlreadyServing", "ChannelServer", "handle_connection", "open_unix_listener"]

log = logging.getLogger("loopd")

FIRST_FRAME_TIMEOUT_S = 30.0


class AlreadyServing(Exception):
    """Another loopd is listening on the socket."""


async def open_unix_listener(path: Path) -> trio.SocketListener:
    """Listen on `path` (mode 0600, its folder 0700), replacing a stale socket file.

    Raises:
        AlreadyServing: something is listening there already.
        OSError: the folder or the socket cannot be made.
    """
    if _prepare_folder(path):
        try:
            probe = await trio.open_unix_socket(str(path))
        except OSError:
            _remove(path)  # nobody listens: a socket left by a loopd that did not stop cleanly
        else:
            await probe.aclose()
            raise AlreadyServing(f"another loopd is already listening on {path}")
    sock = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket file is born 0600
    try:
        await sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(128)
    return trio.SocketListener(sock)


def _prepare_folder(path: Path) -> bool:
    """Make the socket's folder (0700); True when a file is already at `path`."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    return path.exists() or path.is_symlink()


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class ChannelServer:
    """Accepts connections until told to stop; then lets running turns finish for a grace
    period and cancels what is left."""

    def __init__(self, daemon: Daemon, *, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S):
        self.daemon = daemon
        self.first_frame_timeout = first_frame_timeout
        self._accepting = trio.CancelScope()
        self._grace = 0.0

    def stop(self, grace: float) -> None:
        """Stop accepting; running turns get `grace` seconds to finish."""
        self._grace = grace
        self._accepting.cancel()

    async def serve(
        self,
        listener: trio.SocketListener,
        path: Path,
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until `stop()`; the socket file is removed once no longer listening.

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
                _remove(path)
            connections.cancel_scope.deadline = trio.current_time() + self._grace

    async def _handle(self, stream: trio.SocketStream) -> None:
        await handle_connection(stream, self.daemon, self.first_frame_timeout)


async def handle_connection(
    stream: trio.abc.Stream, daemon: Daemon, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S
) -> None:
    """Serve one connection: one turn frame in, its frames out. Never raises what a peer did."""
    try:
        decoder = FrameDecoder()
        first: Frame | BadFrame | None = BadFrame(
            f"no frame within {first_frame_timeout:g} s of connecting"
        )
        with trio.move_on_after(first_frame_timeout):
            first = await _read_frame(stream, decoder)
        if first is None:
            return  # connected and left without a word
        if isinstance(first, BadFrame):
            await stream.send_all(encode_frame(WireError(ErrorCode.BAD_FRAME, first.reason)))
            return
        if not isinstance(first, TurnFrame):
            kind = frame_kind(first)
            message = f"a {kind!r} frame is sent by loopd, not to it; send a 'turn' frame"
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


async def _run(
    stream: trio.abc.Stream, decoder: FrameDecoder, daemon: Daemon, turn: TurnFrame
) -> None:
    """Run the turn in this task (it starts at once), its frames written by a child."""
    send, receive = trio.open_memory_channel[Frame](math.inf)
    written = trio.Event()

    def on_event(event: object) -> None:
        send.send_nowait(TurnEventFrame(event=event))  # type: ignore[arg-type]

    async def deliver(final: Frame) -> None:
        with send:
            send.send_nowait(final)
        await written.wait()

    async def write() -> None:
        await _write_frames(stream, receive)
        written.set()

    async def watch(cancel: trio.CancelScope) -> None:
        """The channel sends nothing after its turn frame; its end of file cancels the turn."""
        while await stream.receive_some():
            pass
        cancel.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        nursery.start_soon(watch, nursery.cancel_scope)
        await daemon.turn(turn, on_event, deliver)
        nursery.cancel_scope.cancel()  # the final frame is out: stop watching


async def _write_frames(stream: trio.abc.Stream, frames: trio.MemoryReceiveChannel[Frame]) -> None:
    """Write frames as they come, all that are ready in one write, until the final one."""
    async for frame in frames:
        batch = [frame]
        with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
            while True:
                batch.append(frames.receive_nowait())
        await stream.send_all(b"".join(_encoded(f) for f in batch))


def _encoded(frame: Frame) -> bytes:
    try:
        return encode_frame(frame)
    except ValueError as exc:  # over the frame limit: say so instead of sending it
        final = not isinstance(frame, TurnEventFrame)
        error = WireError(ErrorCode.INTERNAL, str(exc))
        return encode_frame(error) if final else b""
