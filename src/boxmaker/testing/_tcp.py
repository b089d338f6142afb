"""The fake server on a real TCP port: HTTP/1.1 with h11, keep-alive, chunked streams.

A refused connection is closed at once without an answer; a cut closes the socket mid-body
(the client sees an incomplete chunked read). While a response is under way the connection is
watched for the client's end of file, so a client that goes away during a stall or a stream is
noticed at once (the real server polls every second) and counted as a disconnect.
"""

from __future__ import annotations

from typing import Any

import h11
import trio

from .transport import CUT, FakeResponse, Handler, Refused

__all__ = ["serve_tcp"]

MAX_REQUEST = 64 * 1024 * 1024


async def serve_tcp(
    fake: Handler,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `fake` (any `Handler`) on `host:port` forever; `task_status.started(port)` once
    listening."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]

    async def handler(stream: trio.SocketStream) -> None:
        try:
            await _serve_connection(fake, stream)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            pass  # the client went away; nothing to answer (plain, or out of a nursery)
        finally:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(bound)


async def _serve_connection(fake: Handler, stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST)
    while True:
        request = await _next_event(conn, stream)
        if not isinstance(request, h11.Request):
            return
        body = bytearray()
        while isinstance(event := await _next_event(conn, stream), h11.Data):
            body += event.data
        if not await _answer(fake, conn, stream, request, bytes(body)):
            return
        if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            return
        conn.start_next_cycle()


async def _answer(
    fake: Handler,
    conn: h11.Connection,
    stream: trio.SocketStream,
    request: h11.Request,
    body: bytes,
) -> bool:
    """Answer one request while watching for the client's end of file.

    Returns False when the connection must close: refused, cut, or the client left.
    """
    headers = {k.decode().lower(): v.decode() for k, v in request.headers}
    path = request.target.decode()  # with its query: the fake splits it
    finished = gone = False
    parts: Any = None

    async def watch() -> None:
        nonlocal gone
        try:
            data = await stream.receive_some()
        except trio.BrokenResourceError:
            data = b""
        if data:
            conn.receive_data(data)  # a pipelined request; h11 keeps it for the next cycle
            return
        gone = True
        nursery.cancel_scope.cancel()

    async def connected() -> None:
        pass

    async def send() -> bool:
        """False for a refused connection or a cut body: it closes without an end."""
        nonlocal parts
        try:
            answer = await fake.handle(request.method.decode(), path, headers, body, connected)
        except Refused:
            return False
        await stream.send_all(conn.send(_response(answer)) or b"")
        if isinstance(answer.body, bytes):
            await stream.send_all(conn.send(h11.Data(data=answer.body)) or b"")
        else:
            parts = answer.body
            async for part in parts:
                if part is CUT:
                    return False
                await stream.send_all(conn.send(h11.Data(data=part)) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
        return True

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            finished = await send()
            nursery.cancel_scope.cancel()
    except* (trio.BrokenResourceError, trio.ClosedResourceError):  # the nursery groups them
        gone = True
    finally:
        if gone and not finished:
            fake.note_disconnect()
        if parts is not None:
            await parts.aclose()
    return finished and not gone


def _response(answer: FakeResponse) -> h11.Response:
    return h11.Response(
        status_code=answer.status,
        reason=answer.reason.encode(),
        headers=[(k.encode(), v.encode()) for k, v in answer.headers],
    )


async def _next_event(conn: h11.Connection, stream: trio.SocketStream) -> Any:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some())
            continue
        return event
