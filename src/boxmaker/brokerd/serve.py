"""The `broker.sock` server: one request frame a connection, answered by one final frame.

What each side may send is `channel/broker_codec.py`'s (`BrokerdConnection`): `list_tools` is
answered `tools`, `call`, `approve` and `recall` (auto-recall) are answered `response`,
`session_changed` and `session_removed` `noted`; a bad frame, or one of a kind brokerd sends,
`error bad_frame`. A peer that is not brokerd's own user (or root), as the kernel says
(`SO_PEERCRED`), is closed on without a word; one that sends nothing for `FIRST_FRAME_TIMEOUT_S`
is closed on too. A connection is a task of its own: nothing one peer does reaches another, or
brokerd. A peer that closes the connection before the answer (loopd stopped waiting) cancels the
call: a command or a cell still running is killed, with everything it started.
"""

from __future__ import annotations

import contextlib
import logging

import trio

from ..channel import END, MAX_FRAME, NEED_DATA, BadFrame, BrokerdConnection, BrokerRequest
from ..proto import (
    ApproveFrame,
    BrokerFrame,
    CallFrame,
    ListToolsFrame,
    NotedFrame,
    RecallFrame,
    ResponseFrame,
    SessionChangedFrame,
    SessionRemovedFrame,
    UndoFrame,
)
from ..sansio import Signal
from ..serving import SocketServer, peer_uid, trusted
from .service import Broker

__all__ = ["FIRST_FRAME_TIMEOUT_S", "BrokerServer", "handle_connection"]

log = logging.getLogger("brokerd")

FIRST_FRAME_TIMEOUT_S = 30.0
WRITE_TIMEOUT_S = 30.0


class BrokerServer(SocketServer):
    """`broker.sock`'s connections, each served by `handle_connection`."""

    def __init__(self, broker: Broker) -> None:
        super().__init__()
        self.broker = broker

    def status(self) -> str:
        broker = self.broker
        return f"{self.connections} connections; {broker.status()}; {broker.memory.status()}"

    async def handle(self, stream: trio.SocketStream) -> None:
        await handle_connection(stream, self.broker)


async def handle_connection(stream: trio.SocketStream, broker: Broker) -> None:
    """Serve one connection: one frame in, one final frame out. Never raises what a peer did."""
    try:
        uid = peer_uid(stream.socket)
        if uid is not None and not trusted(uid):
            log.warning("refused a connection from uid %s", uid)
            return
        connection = BrokerdConnection()
        request: BrokerRequest | BadFrame | Signal = BadFrame(
            f"no frame within {FIRST_FRAME_TIMEOUT_S:g} s of connecting"
        )
        with trio.move_on_after(FIRST_FRAME_TIMEOUT_S):
            request = await _first(stream, connection)
        if request is END:
            return
        if isinstance(request, BadFrame | Signal):
            answer = connection.refusal(request)
        elif (answered := await _unless_closed(stream, broker, request)) is not None:
            answer = answered
        else:
            log.info("the peer closed the connection before the answer: the call was cancelled")
            return
        with trio.move_on_after(WRITE_TIMEOUT_S):
            await stream.send_all(connection.answer(answer))
    except* (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # loopd went away (it stopped waiting): what ran, ran
    except* Exception:
        log.exception("connection failed")
    finally:
        with trio.move_on_after(1) as cleanup:
            cleanup.shield = True
            await stream.aclose()


async def _first(
    stream: trio.SocketStream, connection: BrokerdConnection
) -> BrokerRequest | BadFrame | Signal:
    while (request := connection.next_request()) is NEED_DATA:
        connection.receive_data(await stream.receive_some())
    return request


async def _unless_closed(
    stream: trio.SocketStream, broker: Broker, request: BrokerRequest
) -> BrokerFrame | None:
    """The answer to `request`; or None, cancelled, if the peer closed the connection first
    (what it sends after its frame is read and dropped)."""
    answer: BrokerFrame | None = None
    async with trio.open_nursery() as nursery:

        async def answer_it() -> None:
            nonlocal answer
            answer = await _answer(broker, request)
            nursery.cancel_scope.cancel()

        nursery.start_soon(answer_it)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await stream.receive_some(MAX_FRAME):
                pass
        nursery.cancel_scope.cancel()
    return answer


async def _answer(broker: Broker, request: BrokerRequest) -> BrokerFrame:
    match request:
        case ListToolsFrame():
            return broker.listing()
        case CallFrame(request=call):
            return ResponseFrame(await broker.call(call))
        case ApproveFrame(session=session, id=id, answer=answer):
            return ResponseFrame(await broker.approve(session, id, answer))
        case RecallFrame():
            return ResponseFrame(await broker.auto_recall(request))
        case SessionChangedFrame(session=session):
            await broker.session_changed(session)
            return NotedFrame()
        case UndoFrame():
            return await broker.undo(request)
        case SessionRemovedFrame(session=session, identity=identity):
            await broker.session_removed(session, identity)
            return NotedFrame()
