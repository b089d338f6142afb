"""A question of bxctl's own at the terminal (an approval's), whose keys are read by whoever
waits on the terminal."""

from __future__ import annotations

import contextlib

import trio

__all__ = ["Question"]


class Question:
    """A question of bxctl's own at the terminal: the keys typed while it stands are its, read
    by whoever waits on the terminal (the steering task, when a turn is steered)."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[bytes](16)
        self.answered = trio.Event()

    def give(self, data: bytes) -> None:
        with contextlib.suppress(trio.WouldBlock):
            self._send.send_nowait(data)

    async def key(self) -> bytes:
        return await self._receive.receive()
