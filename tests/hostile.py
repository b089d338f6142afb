"""A hostile llama-server, for the tests of what loopd does with bytes it did not choose: an
error body that never stops, a line that never ends, a stream that never finishes, a delta
larger than a frame. It is a `Handler` (`boxmaker.testing.transport`), so it runs in process
behind the fake server's own `MockTransport`, and it counts how many parts of each body the
client pulled, so a test can show a body was never read whole.

The bodies are the real server's chunks (`boxmaker.testing._wire`), only more or longer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import attrs
import trio

from boxmaker.testing._mock import mock_transport
from boxmaker.testing._wire import ChunkWriter, error_body, json_headers, sse_headers
from boxmaker.testing.transport import Connected, FakeResponse

KIB = 1024
MIB = 1024 * KIB

Body = Callable[[], AsyncIterator[bytes]]
NO_SLOTS = error_body(501, "This server does not support slots endpoint.", "not_supported_error")


@attrs.define
class Hostile:
    """Answers each chat request with the next of `first`, then with `body()` (status
    `status`), `/health` with `{"status":"ok"}`, or a 500 with `health` when given, and
    `/slots` with 501, as a server started with `--no-slots` does."""

    body: Body
    status: int = 200
    health: Body | None = None
    first: list[Body] = attrs.field(factory=list)
    requests: int = 0  # chat requests received
    pulled: int = 0  # body parts the client took
    disconnects: int = 0

    async def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes, connected: Connected
    ) -> FakeResponse:
        await connected()
        if path == "/health":
            if self.health is None:
                return FakeResponse(200, "OK", json_headers(15), b'{"status":"ok"}')
            return FakeResponse(500, "Internal Server Error", _plain(), self._counted(self.health))
        if path == "/slots":
            return FakeResponse(501, "Not Implemented", json_headers(len(NO_SLOTS)), NO_SLOTS)
        self.requests += 1
        if self.first:
            return FakeResponse(200, "OK", sse_headers(), self._counted(self.first.pop(0)))
        sse = self.status == 200
        headers_ = sse_headers() if sse else _plain()
        return FakeResponse(
            self.status, "OK" if sse else "Error", headers_, self._counted(self.body)
        )

    async def _counted(self, body: Body) -> AsyncIterator[bytes]:
        async with aclosing(body()) as parts:
            async for part in parts:
                self.pulled += 1
                yield part
                await trio.lowlevel.checkpoint()  # as a read from a socket would

    def note_disconnect(self) -> None:
        self.disconnects += 1

    def mock_transport(self) -> Any:
        return mock_transport(self)


def _plain() -> list[tuple[str, str]]:
    return [("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")]


def writer() -> ChunkWriter:
    return ChunkWriter("chatcmpl-hostile", "hostile.gguf", 1795990732)


def endless(total: int, part: bytes = b"x" * (64 * KIB)) -> Body:
    """`total` bytes of `part`s: an error body, or a line that never ends."""

    async def body() -> AsyncIterator[bytes]:
        for _ in range(total // len(part)):
            yield part

    return body


def ticking(every_s: float, chunk: Callable[[ChunkWriter], bytes]) -> Body:
    """A stream that starts, then sends `chunk` every `every_s` seconds, forever."""

    async def body() -> AsyncIterator[bytes]:
        w = writer()
        yield w.role()
        while True:
            await trio.sleep(every_s)
            yield chunk(w)

    return body


def answer(*texts: str) -> Body:
    """A whole completion whose content comes as one delta per text."""

    async def body() -> AsyncIterator[bytes]:
        w = writer()
        yield w.role()
        for text in texts:
            yield w.content(text)
        yield w.finish("stop")
        yield w.usage(cache_n=0, prompt_n=10, predicted_n=len(texts), prompt_ms=1.0,
                      predicted_ms=1.0)  # fmt: skip
        yield w.done()

    return body
