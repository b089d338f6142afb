"""Requests `loop.sock` answers with one final frame (`approval`, `list_approvals`, `stop`,
`attach`), each on a connection of its own."""

from __future__ import annotations

import base64
import contextlib
import hashlib
from pathlib import Path

import trio

from ..channel import Request
from ..proto import PIECE_BYTES, AttachFrame, FileOffer, FilePieceFrame, Frame
from .connection import ChannelError, open_channel

__all__ = ["ask", "attach", "offer_of"]


async def ask(socket: Path, frame: Request) -> Frame:
    """Send `frame` on a new connection and return loopd's answer.

    Raises:
        ChannelError: loopd could not be reached, or went away before it answered.
    """
    channel = await open_channel(socket)
    async with channel:
        await channel.send(frame)
        return await channel.receive()


def offer_of(name: str, media_type: str, data: bytes) -> FileOffer:
    """What a turn frame names of a file of `data`."""
    return FileOffer(name, media_type, len(data), hashlib.sha256(data).hexdigest())


async def attach(socket: Path, offer: FileOffer, data: bytes) -> Frame:
    """Bring a file's bytes to loopd for a turn to come (docs/protocol.md, "Files in a turn"):
    the `attach` frame, then the bytes in `file_piece` frames; loopd's answer (`attached`, or
    an error). loopd may answer before the last piece (a file it refuses at once): the answer
    is read all the same.

    Raises:
        ChannelError: loopd could not be reached, or went away before it answered.
    """
    channel = await open_channel(socket)
    async with channel:
        await channel.send(AttachFrame(offer))

        async def sending() -> None:
            # loopd may answer and close early (a file it refuses): its answer says why.
            with contextlib.suppress(ChannelError, trio.ClosedResourceError):
                for start in range(0, len(data), PIECE_BYTES):
                    piece = base64.b64encode(data[start : start + PIECE_BYTES]).decode()
                    await channel.send(FilePieceFrame(piece))

        answer: list[Frame | ChannelError] = []
        async with trio.open_nursery() as nursery:

            async def receiving() -> None:
                try:
                    answer.append(await channel.receive())
                except ChannelError as error:  # raised below, not as a group
                    answer.append(error)
                nursery.cancel_scope.cancel()

            nursery.start_soon(sending)
            nursery.start_soon(receiving)
        if isinstance(answer[0], ChannelError):
            raise answer[0]
        return answer[0]
