"""A request `loop.sock` answers with one final frame (`approval`, `list_approvals`, `stop`),
on a connection of its own."""

from __future__ import annotations

from pathlib import Path

from ..channel import Request
from ..proto import Frame
from .connection import open_channel

__all__ = ["ask"]


async def ask(socket: Path, frame: Request) -> Frame:
    """Send `frame` on a new connection and return loopd's answer.

    Raises:
        ChannelError: loopd could not be reached, or went away before it answered.
    """
    channel = await open_channel(socket)
    async with channel:
        await channel.send(frame)
        return await channel.receive()
