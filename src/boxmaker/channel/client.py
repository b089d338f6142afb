"""The channel client: connect to `loop.sock`, send one `turn`, read frames until the final one.

Used by `bxctl` and by tests. Errors a person can act on are one `ChannelError` with a
sentence (no loopd listening, permission denied, the connection cut before the final frame).
"""

from __future__ import annotations

from pathlib import Path

import trio

from ..proto import Frame, TurnFrame
from .codec import END, NEED_DATA, BadFrame, FrameDecoder, encode_frame

__all__ = ["Channel", "ChannelError", "open_channel"]


class ChannelError(Exception):
    """The channel could not reach loopd or was cut off; the message says what to do."""


class Channel(trio.abc.AsyncResource):
    def __init__(self, stream: trio.SocketStream, path: Path) -> None:
        self._stream = stream
        self._path = path
        self._decoder = FrameDecoder()

    async def send(self, frame: TurnFrame) -> None:
        """Send the turn.

        Raises:
            ChannelError: loopd went away since the connection was made.
        """
        try:
            await self._stream.send_all(encode_frame(frame))
        except trio.BrokenResourceError as exc:
            raise ChannelError(f"the connection to loopd broke: {exc}") from None

    async def receive(self) -> Frame:
        """The next frame from loopd.

        Raises:
            ChannelError: loopd closed the connection or sent something that is not a frame.
        """
        while True:
            frame = self._decoder.next_frame()
            if isinstance(frame, BadFrame):
                raise ChannelError(f"loopd sent something that is not a frame: {frame.reason}")
            if frame is END:
                raise ChannelError(f"loopd closed the connection on {self._path} mid-turn")
            if frame is not NEED_DATA:
                return frame  # type: ignore[return-value]
            try:
                data = await self._stream.receive_some()
            except trio.BrokenResourceError as exc:
                raise ChannelError(f"the connection to loopd broke: {exc}") from None
            self._decoder.receive_data(data)

    async def aclose(self) -> None:
        await self._stream.aclose()


async def open_channel(path: Path) -> Channel:
    """Connect to loopd's socket.

    Raises:
        ChannelError: nobody listens there, or the socket is not ours to use.
    """
    try:
        stream = await trio.open_unix_socket(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        raise ChannelError(
            f"no loopd is listening on {path}; start it with `loopd serve --config <file>`"
        ) from None
    except PermissionError:
        raise ChannelError(f"cannot use {path}: permission denied (it is its owner's)") from None
    except OSError as exc:
        raise ChannelError(f"cannot connect to {path}: {exc.strerror or exc}") from None
    return Channel(stream, path)
