"""The edge of httpx: its exceptions mapped to `InferError` (here and nowhere else), a
response's body read chunk by chunk with the idle timeout, and the server's small answers read
with a bound.

A server's answer is bytes loopd did not choose: an error body is kept up to 64 KiB and the
answer of a small route (`/health`, `/slots`, `input_tokens`) up to 1 MiB; the rest is never
read (a 300 MB error body once grew loopd to 732 MB).
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx
import trio

from .errors import Connect, Http, InferError, Phase, ProtocolError, Timeout

__all__ = [
    "CLOSE_GRACE_S",
    "MAX_ANSWER",
    "MAX_ERROR_BODY",
    "capped_text",
    "mapped",
    "post_streaming",
    "read_small",
    "reading",
]

CLOSE_GRACE_S = 2.0  # how long closing a response may take when the caller is cancelled
MAX_ERROR_BODY = 64 * 1024  # bytes of an error answer kept
MAX_ANSWER = 1024 * 1024  # bytes of a small route's answer
_SENDING = "http11.send_request_headers.started"  # httpcore's trace: the request goes out


async def read_small(
    http: httpx.AsyncClient, method: str, path: str, content: bytes | None = None
) -> tuple[int, str]:
    """One request to a route with a short answer: its status and its body as text, at most
    `MAX_ANSWER` bytes of a 200 and `MAX_ERROR_BODY` of anything else.

    Raises:
        InferError: the request failed, mapped.
    """
    try:
        request = http.build_request(method, path, content=content)
        response = await http.send(request, stream=True)
        cap = MAX_ANSWER if response.status_code == 200 else MAX_ERROR_BODY
        parts: list[bytes] = []
        size = 0
        chunks = cast(AsyncGenerator[bytes, None], response.aiter_raw())
        try:
            async for part in chunks:
                parts.append(part)
                size += len(part)
                if size > cap:
                    break
        finally:
            with trio.move_on_after(CLOSE_GRACE_S) as cleanup:
                cleanup.shield = True
                await chunks.aclose()
                await response.aclose()
    except httpx.HTTPError as exc:
        raise mapped(exc) from exc
    return response.status_code, capped_text(b"".join(parts), cap)


def capped_text(body: bytes, cap: int) -> str:
    """A body as text, cut at `cap` bytes with a note saying so."""
    if len(body) <= cap:
        return body.decode(errors="replace")
    return body[:cap].decode(errors="replace") + f" … (cut at {cap} bytes)"


def mapped(exc: httpx.HTTPError) -> InferError:
    """The one place where httpx's exceptions become `InferError`s."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return Connect(str(exc) or type(exc).__name__)
    if isinstance(exc, httpx.TransportError):
        detail = str(exc) or type(exc).__name__
        return ProtocolError(f"the connection closed before [DONE]: {detail}", cut=True)
    return ProtocolError(f"{type(exc).__name__}: {exc}")


@asynccontextmanager
async def reading(
    response: httpx.Response, idle: float
) -> AsyncIterator[Callable[[], Awaitable[bytes]]]:
    """Yield a `read()` that returns the next chunk of the body, `b""` at the end, with at
    most `idle` seconds between two chunks; a status other than 200 is raised as `Http` with
    at most `MAX_ERROR_BODY` bytes of its body (the rest is never read). The response is
    closed on the way out, whatever happened.

    Raises:
        Http: the status is not 200.
        Timeout: ("idle") no chunk within `idle` seconds.
        InferError: the stream failed, mapped.
    """
    # An async generator (typed as an iterator): closed explicitly below, never left to GC.
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_raw())
    # One scope for the whole stream, its deadline pushed forward before each read: the
    # idle timeout costs an assignment per chunk, not a cancel scope.
    streaming = trio.CancelScope()

    async def read() -> bytes:
        streaming.deadline = trio.current_time() + idle
        try:
            return await anext(chunks, b"")
        except httpx.HTTPError as exc:
            raise mapped(exc) from exc

    try:
        with streaming:
            if response.status_code != 200:
                parts: list[bytes] = []
                size = 0
                while size <= MAX_ERROR_BODY and (part := await read()):
                    parts.append(part)
                    size += len(part)
                raise Http(response.status_code, capped_text(b"".join(parts), MAX_ERROR_BODY))
            yield read
            streaming.deadline = math.inf  # the caller is done reading
        if streaming.cancelled_caught:
            raise Timeout("idle", idle)
    finally:
        with trio.move_on_after(CLOSE_GRACE_S) as cleanup:
            cleanup.shield = True
            await chunks.aclose()
            await response.aclose()


async def post_streaming(
    http: httpx.AsyncClient,
    post: httpx.Request,
    connect_s: float,
    first_byte_s: float,
    meanwhile: Callable[[], Awaitable[None]] | None = None,
) -> httpx.Response:
    """Send `post`; the response once its headers came, its body not read yet. `meanwhile`
    runs while the headers are awaited, and is cancelled when they come.

    Two phases, one cancel scope: `connect` until the request headers go out (httpcore's
    `trace` says when), then `first_byte` until the response headers come.

    Raises:
        InferError: `Timeout` naming the phase, or what httpx raised, mapped.
    """
    phase: Phase = "connect"
    seconds = connect_s
    waiting = trio.CancelScope(deadline=trio.current_time() + seconds)

    async def trace(event: str, _info: dict[str, Any]) -> None:
        nonlocal phase, seconds
        if event == _SENDING and phase == "connect":
            phase, seconds = "first_byte", first_byte_s
            waiting.deadline = trio.current_time() + seconds

    post.extensions["trace"] = trace
    response: httpx.Response | httpx.HTTPError | None = None
    with waiting:
        async with trio.open_nursery() as nursery:
            if meanwhile is not None:
                nursery.start_soon(meanwhile)
            try:
                response = await http.send(post, stream=True)
            except httpx.HTTPError as exc:  # raised below, outside the nursery
                response = exc
            nursery.cancel_scope.cancel()
    if response is None:
        raise Timeout(phase, seconds)
    if isinstance(response, httpx.HTTPError):
        raise mapped(response) from response
    return response
