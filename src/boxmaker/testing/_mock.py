"""The fake server (any `Handler`) as an in-process `httpx.MockTransport`.

It behaves as a connection would: it calls httpcore's `trace` callback with
`http11.send_request_headers.started` and `http11.send_request_body.complete` once
"connected" (so the client's connect and first-byte timeouts, and what it does once a request
is out, see the same phases as on a socket), raises `httpx.ConnectError` for a
refused connection and `httpx.RemoteProtocolError` for a stream cut mid-body, and counts a
stream the client closes before its end as a disconnect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import trio

from .transport import CUT, Handler, Refused

__all__ = ["mock_transport"]


class _Body(httpx.AsyncByteStream):
    """A streamed body; an iterator object, not an async generator, so nothing is left
    for the garbage collector when the client stops early."""

    def __init__(self, fake: Handler, parts: AsyncIterator[bytes | object]) -> None:
        self._fake = fake
        self._parts = parts
        self._finished = False

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        try:
            part = await anext(self._parts)
        except StopAsyncIteration:
            self._finished = True
            raise
        if part is CUT:
            self._finished = True
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)"
            )
        assert isinstance(part, bytes)
        return part

    async def aclose(self) -> None:
        if not self._finished:
            self._finished = True
            self._fake.note_disconnect()
        aclose = getattr(self._parts, "aclose", None)
        if aclose is not None:
            await aclose()


def mock_transport(fake: Handler) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        trace = request.extensions.get("trace")

        async def connected() -> None:
            if trace is not None:
                await trace("http11.send_request_headers.started", {"request": request})
                await trace("http11.send_request_body.complete", {"request": request})

        body = await request.aread()
        headers = dict(request.headers.items())
        try:
            path = request.url.raw_path.decode()  # with the query, as on a socket
            answer = await fake.handle(request.method, path, headers, body, connected)
        except Refused:
            # As httpx raises it for a refused connection: no cause of ours behind it.
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request) from None
        except trio.Cancelled:
            fake.note_disconnect()  # the client left before the response headers
            raise
        if isinstance(answer.body, bytes):  # a stream too, as on a socket
            stream: httpx.AsyncByteStream = httpx.ByteStream(answer.body)
        else:
            stream = _Body(fake, answer.body)
        return httpx.Response(answer.status, headers=answer.headers, stream=stream)

    return httpx.MockTransport(handler)
