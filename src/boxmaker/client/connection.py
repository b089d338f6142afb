"""The connection: connect to `loop.sock`, send one `turn`, read frames until the final one.

Used by `bxctl`, `gatewayd` and tests. Errors a person can act on are one `ChannelError` with a
sentence (no loopd listening, permission denied, the connection cut before the final frame).

Before anything is sent, the socket must be its user's own (or root's): the socket file's
owner, and the process listening on it (`SO_PEERCRED`, where the system has it). Anyone who
could create the path first (a shared folder, a squatter) would otherwise get the user's
messages. `turn_done_part` frames (an answer too long for one frame) are joined into the
`turn_done` (or `duplicate`) that follows them.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

import trio

from ..channel import END, NEED_DATA, BadFrame, FrameDecoder, Request, encode_frame
from ..proto import DuplicateFrame, FilePieceFrame, Frame, TurnDoneFrame, TurnDonePartFrame

__all__ = ["FINISH_S", "Channel", "ChannelError", "open_channel"]

FINISH_S = 2.0  # waited at most for loopd's close after the final frame


class ChannelError(Exception):
    """The channel could not reach loopd or was cut off; the message says what to do."""


class Channel(trio.abc.AsyncResource):
    def __init__(self, stream: trio.SocketStream, path: Path) -> None:
        self._stream = stream
        self._path = path
        self._decoder = FrameDecoder()
        self._parts: list[str] = []  # of a turn_done too long for one frame

    async def send(self, frame: Request | FilePieceFrame) -> None:
        """Send the turn (or an approval's answer, or the question of what waits).

        Raises:
            ChannelError: loopd went away since the connection was made.
        """
        try:
            await self._stream.send_all(encode_frame(frame))
        except trio.BrokenResourceError as exc:
            raise ChannelError(f"the connection to loopd broke: {exc}") from exc

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
            if isinstance(frame, TurnDonePartFrame):
                self._parts.append(frame.content)
                continue
            if isinstance(frame, TurnDoneFrame) and self._parts:
                content = "".join([*self._parts, frame.content])
                self._parts.clear()
                return TurnDoneFrame(content, frame.usage)
            if isinstance(frame, DuplicateFrame) and self._parts:
                content = "".join([*self._parts, frame.content or ""])
                self._parts.clear()
                return DuplicateFrame(frame.origin, frame.outcome, content)
            if frame is not NEED_DATA:
                return frame  # type: ignore[no-any-return]
            try:
                data = await self._stream.receive_some()
            except trio.BrokenResourceError as exc:
                raise ChannelError(f"the connection to loopd broke: {exc}") from exc
            self._decoder.receive_data(data)

    async def finish(self) -> None:
        """After the final frame: wait, at most `FINISH_S`, for loopd to close the connection.
        loopd closes it once the turn's last work is done (its `index.json` is written after
        `turn_done` goes out), so a command run after this one sees the turn listed. What
        comes meanwhile is not a frame of this turn and is dropped."""
        with trio.move_on_after(FINISH_S):
            try:
                while await self._stream.receive_some():
                    pass
            except trio.BrokenResourceError:
                pass

    async def aclose(self) -> None:
        await self._stream.aclose()


async def open_channel(path: Path) -> Channel:
    """Connect to loopd's socket, once it is known to be this user's (or root's).

    Raises:
        ChannelError: nobody listens there, or the socket (or the process listening on it)
            belongs to another user: nothing was sent.
    """
    _check_owner(path)
    try:
        stream = await trio.open_unix_socket(str(path))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise ChannelError(
            f"no loopd is listening on {path}; start it with `loopd serve --config <file>`"
        ) from exc
    except PermissionError as exc:
        raise ChannelError(f"cannot use {path}: permission denied (it is its owner's)") from exc
    except OSError as exc:
        raise ChannelError(f"cannot connect to {path}: {exc.strerror or exc}") from exc
    try:
        _check_peer(stream.socket, path)
    except BaseException:
        await stream.aclose()
        raise
    return Channel(stream, path)


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _refusal(path: Path, what: str, uid: int) -> ChannelError:
    return ChannelError(
        f"{path}: {what} uid {uid}, not to you (uid {os.geteuid()}) or root; not sending "
        "anything there (another user may be listening in its place)"
    )


def _check_owner(path: Path) -> None:
    """The socket file, where the path leads, must be this user's or root's."""
    try:
        st = os.stat(path)
    except OSError:
        return  # nothing there: connecting says so in its own words
    if not stat.S_ISSOCK(st.st_mode):
        raise ChannelError(f"{path} is not a socket; is [channel] socket (or --socket) right?")
    if not _trusted(st.st_uid):
        raise _refusal(path, "the socket belongs to", st.st_uid)


def _check_peer(sock: trio.socket.SocketType, path: Path) -> None:
    """The process listening must run as this user or root (Linux says who it is)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return  # not on this system: the file's owner was checked
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    if not _trusted(uid):
        raise _refusal(path, "the process listening on it runs as", uid)
