"""What the fake server's transports carry: an answer (`FakeResponse`), the marks a handler
uses for a refused connection (`Refused`) and a connection cut mid-body (`CUT`), and the
`Handler` protocol both transports serve (the fake server, or the recorder in front of a real
one). The in-process transport is `_mock.py`, the TCP one `_tcp.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from attrs import define

__all__ = ["CUT", "Connected", "FakeResponse", "Handler", "Refused"]


class Refused(Exception):
    """Raised by a handler for a connection it refuses."""


CUT = object()  # a part of a response body: the connection closes here, mid-stream

Connected = Callable[[], Awaitable[None]]


@define
class FakeResponse:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes | AsyncIterator[bytes | object]


class Handler(Protocol):
    """What answers HTTP requests: the fake server, or the recorder."""

    async def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes, connected: Connected
    ) -> FakeResponse: ...

    def note_disconnect(self) -> None: ...
