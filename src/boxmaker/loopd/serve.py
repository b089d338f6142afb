"""The `loop.sock` server: a trio nursery task per connection, one request per connection.

A connection sends one `turn` frame and reads frames until one is final. While the turn runs,
its events are written as they come (several ready frames go out in one write), and the
connection is watched for the channel's end of file: if the channel closes before the final
frame, the turn is cancelled (its HTTP stream closed, nothing appended for the unfinished
completion), unless it was sent with `detach: true`: a detached turn runs in the service's
nursery (`Daemon.detach`) and its connection only listens, while it is there. A `watch`
connection stays open and hears its sessions' turns until the channel leaves or loopd stops;
`stop`, `approval` and `list_approvals` are answered with one final frame. A bad frame gets
`error bad_frame` saying what was wrong; so does anything sent after the request (a turn is
cancelled). What a connection may carry, each way, is the codec's rule
(`channel.LoopdConnection`); this is the I/O around it. Nothing a peer does reaches past its
own connection: loopd keeps serving the others.

Nothing a peer does holds loopd's memory or a turn for long either: the frames waiting for a
channel are bounded (`outbox.MAX_QUEUED` bytes), and a channel that takes none of its frames
for `[channel] write_timeout_s` is dropped, its turn cancelled as if it had left (a detached
turn and every watched one run on). Text too long for one frame goes out over several
(`channel.split_frame`). The socket itself is `listener.py`'s.
"""

from __future__ import annotations

import logging
from functools import partial

import trio

from ..channel import (
    END,
    MORE_AFTER_TURN,
    NEED_DATA,
    BadFrame,
    LoopdConnection,
    Piece,
    Request,
    Sending,
)
from ..proto import (
    ApprovalDoneFrame,
    ApprovalFrame,
    AttachFrame,
    ErrorCode,
    Frame,
    ListApprovalsFrame,
    ModeFrame,
    StopFrame,
    StoppedFrame,
    TurnFrame,
    UndoFrame,
    WaitingFrame,
    WatchFrame,
    WireError,
)
from ..sansio import Signal
from ..serving import SocketServer
from .acts import owner_act
from .outbox import Outbox
from .service import Daemon, Tether
from .watchers import MAX_WATCHES, Watch

__all__ = ["ChannelServer", "handle_connection"]

log = logging.getLogger("loopd")

FIRST_FRAME_TIMEOUT_S = 30.0


class ChannelServer(SocketServer):
    """`loop.sock`'s connections, each served by `handle_connection`."""

    def __init__(self, daemon: Daemon, *, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S):
        super().__init__()
        self.daemon = daemon
        self.first_frame_timeout = first_frame_timeout

    def status(self) -> str:
        """One line on what loopd is doing (SIGUSR1)."""
        return f"{self.connections} connections; {self.daemon.status()}"

    def stop(self, grace: float) -> None:
        """Stop accepting; running turns, detached ones too, get `grace` seconds."""
        super().stop(grace)
        self.daemon.stop(grace)

    async def handle(self, stream: trio.SocketStream) -> None:
        await handle_connection(stream, self.daemon, self.first_frame_timeout)


async def handle_connection(
    stream: trio.abc.Stream, daemon: Daemon, first_frame_timeout: float = FIRST_FRAME_TIMEOUT_S
) -> None:
    """Serve one connection: one turn frame in, its frames out. Never raises what a peer did."""
    connection = LoopdConnection()
    try:
        first: Request | Piece | BadFrame | Signal = BadFrame(
            f"no frame within {first_frame_timeout:g} s of connecting"
        )
        with trio.move_on_after(first_frame_timeout):
            first = await _next_event(stream, connection)
        if first is END:
            return  # connected and left without a word
        if isinstance(first, TurnFrame):
            await _run(stream, connection, daemon, first)
        elif isinstance(first, WatchFrame):
            await _watch_sessions(stream, connection, daemon, first)
        elif isinstance(first, AttachFrame):
            await _attach(stream, connection, daemon, first)
        elif isinstance(first, ModeFrame | UndoFrame):
            answer = await owner_act(daemon, first)
            with trio.move_on_after(daemon.config.channel.write_timeout_s):
                await stream.send_all(connection.send(answer))
        elif isinstance(first, ApprovalFrame | ListApprovalsFrame | StopFrame):
            with trio.move_on_after(daemon.config.channel.write_timeout_s):
                await stream.send_all(connection.send(_answer(daemon, first)))
        elif isinstance(first, BadFrame):
            with trio.move_on_after(daemon.config.channel.write_timeout_s):
                await stream.send_all(connection.refuse(first))
    except* (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the channel went away; its turn, if any, was cancelled
    except* Exception:
        log.exception("connection failed")
    finally:
        with trio.move_on_after(1) as cleanup:
            cleanup.shield = True
            await stream.aclose()


async def _attach(
    stream: trio.abc.Stream, connection: LoopdConnection, daemon: Daemon, frame: AttachFrame
) -> None:
    """Take in the file `frame` brings, and answer. Once its bytes have all come, a child
    watches the channel: if it leaves (or sends more) while loopd checks the file or reads a
    PDF, that work is cancelled and nothing is answered (a file being written into the
    uploads just then is kept, and waits its hour as any upload does)."""
    answer: Frame | None = None
    with trio.CancelScope() as attaching:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                await _next_event(stream, connection)  # only its end, or a mistake, comes
                attaching.cancel()

            next_piece = partial(_next_event, stream, connection)
            answer = await daemon.uploads.receive(
                frame, next_piece, partial(nursery.start_soon, watch)
            )
            nursery.cancel_scope.cancel()
    if answer is not None and not attaching.cancelled_caught:
        with trio.move_on_after(daemon.config.channel.write_timeout_s):
            await stream.send_all(connection.send(answer))


async def _next_event(
    stream: trio.abc.Stream, connection: LoopdConnection
) -> Request | Piece | BadFrame | Signal:
    """The connection's next event, reading as much as it takes (never `NEED_DATA`)."""
    while (event := connection.next_event()) is NEED_DATA:
        connection.receive_data(await stream.receive_some())
    return event


def _answer(daemon: Daemon, frame: ApprovalFrame | ListApprovalsFrame | StopFrame) -> Frame:
    """A connection's other requests: the owner's answer to a waiting call, the list of
    what waits, or a stop."""
    approvals = daemon.runtime.approvals
    if isinstance(frame, StopFrame):
        return StoppedFrame(frame.session, daemon.stop_turn(frame.session))
    if isinstance(frame, ListApprovalsFrame):
        return WaitingFrame(approvals.waiting())
    if approvals.answer(frame.id, frame.answer):
        log.info("approval %s: answered %s", frame.id, frame.answer.value)
        return ApprovalDoneFrame(frame.id)
    return WireError(
        ErrorCode.NO_SUCH_APPROVAL,
        f"no call waits for an answer as {frame.id!r} (it was answered, or timed out)",
    )


async def _run(
    stream: trio.abc.Stream, connection: LoopdConnection, daemon: Daemon, turn: TurnFrame
) -> None:
    """Run the turn in this task (it starts at once), its frames written by a child while a
    second child watches the channel: its end of file cancels everything (there is no one
    to tell), and anything it sends ends the turn with `bad_frame`."""
    async with trio.open_nursery() as nursery:
        timeout = daemon.config.channel.write_timeout_s
        outbox = Outbox(stream, connection, timeout, nursery.cancel_scope, f"turn {turn.session}")
        running = trio.CancelScope()  # the turn alone: its channel may still be told why
        nursery.start_soon(outbox.write)
        nursery.start_soon(_listen, stream, connection, running, nursery.cancel_scope)
        tether = Tether(outbox.event, outbox.put)
        detached = daemon.detach(turn, tether) if turn.detach else False
        if isinstance(detached, WireError):
            outbox.put(detached)
        elif detached:
            try:
                with running:
                    await tether.done.wait()
            finally:
                tether.leave()  # whatever happens here, the turn runs on
        else:
            with running:
                await daemon.turn(turn, outbox.event, outbox.final)
        if connection.more_after_turn and connection.state is not Sending.DONE:
            outbox.put(WireError(ErrorCode.BAD_FRAME, MORE_AFTER_TURN))
        await outbox.flushed()
        nursery.cancel_scope.cancel()  # the final frame is out: stop watching


async def _watch_sessions(
    stream: trio.abc.Stream, connection: LoopdConnection, daemon: Daemon, frame: WatchFrame
) -> None:
    """Hear the sessions' turns until the channel leaves (or sends anything: `bad_frame`),
    is dropped for not reading, or loopd stops and no turn runs."""
    async with trio.open_nursery() as nursery:
        timeout = daemon.config.channel.write_timeout_s
        names = ", ".join(sid.value for sid in frame.sessions[:3])
        outbox = Outbox(stream, connection, timeout, nursery.cancel_scope, f"watch of {names}")
        watch = Watch(frame.sessions, frame.can_ask, outbox)
        if not daemon.add_watch(watch):
            refusal = f"{MAX_WATCHES} watches are open, as many as loopd keeps; close one first"
            with trio.move_on_after(timeout):
                await stream.send_all(
                    connection.send(WireError(ErrorCode.TOO_MANY_WATCHES, refusal))
                )
            return
        try:
            nursery.start_soon(outbox.write)
            said = trio.CancelScope()
            nursery.start_soon(_listen, stream, connection, said, nursery.cancel_scope)
            with said:
                await daemon.quiet.wait()
            daemon.watchers.remove(watch)  # it hears nothing more
            if connection.more_after_turn:
                outbox.put(WireError(ErrorCode.BAD_FRAME, MORE_AFTER_TURN))
            else:
                outbox.close()  # loopd stops: what is queued still goes out
            with trio.move_on_after(timeout):
                await outbox.flushed()
            nursery.cancel_scope.cancel()
        finally:
            daemon.watchers.remove(watch)


async def _listen(
    stream: trio.abc.Stream,
    connection: LoopdConnection,
    turn: trio.CancelScope,
    everything: trio.CancelScope,
) -> None:
    event = await _next_event(stream, connection)
    if event is END:
        everything.cancel()  # it left: there is no one to tell
    elif connection.state is not Sending.DONE:
        turn.cancel()  # it sent more (`more_after_turn`): the turn ends with bad_frame
