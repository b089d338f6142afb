"""loopd's tool port: a client of brokerd's `broker.sock` (SPEC section 14).

One connection a request: connect, check that brokerd runs as this user (`SO_PEERCRED`),
send one frame, read one final frame, close. So a brokerd that restarts costs nothing to
reconnect to, and loopd starts without one. Whatever goes wrong is a `FailedResponse` saying
what, and whether the call may have run: nobody listening (it was not sent), no answer within
`[tools] call_timeout_s`, the connection cut, or bytes that are not a response (it may have
run: the model is told to check before calling again). Nothing here raises for brokerd's
sake, and nothing waits unbounded: the answer is one frame of at most 1 MiB, read within the
timeout.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from ..channel import END, NEED_DATA, BadFrame, BrokerClient, BrokerRequest, Wrong
from ..proto import (
    Answer,
    ApproveFrame,
    BrokerFrame,
    CallFrame,
    FailedResponse,
    ListToolsFrame,
    NotedFrame,
    RecallFrame,
    ResponseFrame,
    SessionChangedFrame,
    SessionId,
    SessionRemovedFrame,
    ToolRequest,
    ToolResponse,
    ToolsFrame,
    UndoFrame,
    UndoneFrame,
    UndoPreviewFrame,
    WireError,
    frame_kind,
)
from .peers import peer_uid, socket_owner_problem, trusted

__all__ = ["BrokerDown", "BrokerPort"]

log = logging.getLogger("loopd")

CONNECT_TIMEOUT_S = 5.0


class BrokerDown(Exception):
    """brokerd could not be reached, or did not answer as it should; the message says how."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent  # the request went out: what it asked may have been done


class BrokerPort:
    """The tool port over `broker.sock`."""

    def __init__(self, socket: Path, call_timeout: float) -> None:
        self.socket = socket
        self.call_timeout = call_timeout

    async def call(self, request: ToolRequest) -> ToolResponse:
        return await self._response(CallFrame(request), f"{request.tool} (call {request.call})")

    async def approve(self, session: SessionId, id: str, answer: Answer) -> ToolResponse:
        return await self._response(ApproveFrame(session, id, answer), f"the approval {id}")

    async def auto_recall(self, frame: RecallFrame) -> ToolResponse:
        return await self._response(frame, "auto-recall")

    async def session_changed(self, session: SessionId) -> None:
        """Tell brokerd `session`'s log grew (for its recall index); a brokerd that cannot
        be told catches up when it next starts, or at the session's next turn.

        Raises:
            BrokerDown: brokerd could not be told.
        """
        frame = await self.exchange(SessionChangedFrame(session), CONNECT_TIMEOUT_S)
        if not isinstance(frame, NotedFrame):
            raise BrokerDown(
                f"brokerd answered session_changed with {type(frame).__name__}", sent=True
            )

    async def session_removed(self, session: SessionId, identity: str = "") -> None:
        """Tell brokerd `session` (as `identity`) was removed (its grants and its interpreter
        end).

        Raises:
            BrokerDown: brokerd could not be told.
        """
        frame = await self.exchange(SessionRemovedFrame(session, identity), CONNECT_TIMEOUT_S)
        if not isinstance(frame, NotedFrame):
            raise BrokerDown(
                f"brokerd answered session_removed with {type(frame).__name__}", sent=True
            )

    async def undo(
        self, frame: UndoFrame, timeout: float
    ) -> UndoPreviewFrame | UndoneFrame | WireError:
        """brokerd's preview of an undo (no `confirm`), the undo done, or its refusal (SPEC
        section 21).

        Raises:
            BrokerDown: brokerd could not be reached, or did not answer as it should.
        """
        answer = await self.exchange(frame, timeout)
        if isinstance(answer, UndoPreviewFrame | UndoneFrame | WireError):
            return answer
        raise BrokerDown(f"brokerd answered an undo with {frame_kind(answer)}", sent=True)

    async def list_tools(self) -> ToolsFrame:
        """Every tool brokerd holds, and the roots. Raises `BrokerDown`."""
        frame = await self.exchange(ListToolsFrame(), CONNECT_TIMEOUT_S)
        if not isinstance(frame, ToolsFrame):
            raise BrokerDown(f"brokerd answered a list with {type(frame).__name__}", sent=True)
        return frame

    async def _response(
        self, frame: CallFrame | ApproveFrame | RecallFrame, what: str
    ) -> ToolResponse:
        try:
            answer = await self.exchange(frame, self.call_timeout)
        except BrokerDown as down:
            log.warning("tool port: %s: %s", what, down)
            return FailedResponse(str(down))
        if isinstance(answer, ResponseFrame):
            return answer.response
        assert isinstance(answer, WireError)  # the answers of a call (`broker_codec.ANSWERS`)
        return FailedResponse(
            f"brokerd refused the call ({answer.code.value}: {answer.message}); it was not run"
        )

    async def exchange(self, frame: BrokerRequest, timeout: float) -> BrokerFrame:
        """Send `frame` on a new connection and read brokerd's answer to it (one of
        `broker_codec.ANSWERS`).

        Raises:
            BrokerDown: nobody listens, the socket or its process is another user's, no
                answer within `timeout`, the connection cut, or what came is not an answer.
        """
        if (problem := socket_owner_problem(self.socket)) is not None:
            raise BrokerDown(f"{problem}; nothing was sent to it", sent=False)
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                stream = await trio.open_unix_socket(str(self.socket))
        except trio.TooSlowError as exc:
            raise BrokerDown(
                f"brokerd did not take the connection within {CONNECT_TIMEOUT_S:g} s; the call "
                "was not sent, so it did not run",
                sent=False,
            ) from exc
        except OSError as exc:
            raise BrokerDown(
                f"brokerd is not running (nothing answers on {self.socket}: "
                f"{exc.strerror or exc}); the call was not sent, so it did not run",
                sent=False,
            ) from exc
        async with stream:
            uid = peer_uid(stream.socket)
            if uid is not None and not trusted(uid):
                raise BrokerDown(
                    f"the process on {self.socket} runs as uid {uid}, not as you; nothing was "
                    "sent to it",
                    sent=False,
                )
            with trio.move_on_after(timeout) as waiting:
                try:
                    client = BrokerClient()
                    await stream.send_all(client.send(frame))
                    return await _answer(stream, client)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    raise BrokerDown(
                        f"the connection to brokerd broke ({exc}); the call may have run: "
                        "check its effect before calling it again",
                        sent=True,
                    ) from exc
            assert waiting.cancelled_caught
            raise BrokerDown(
                f"brokerd did not answer within {timeout:g} s ([tools] call_timeout_s); the "
                "call may have run: check its effect before calling it again",
                sent=True,
            )


async def _answer(stream: trio.SocketStream, client: BrokerClient) -> BrokerFrame:
    while True:
        frame = client.next_answer()
        if isinstance(frame, BadFrame):
            raise BrokerDown(
                f"brokerd answered what is not a frame ({frame.reason}); the call may have "
                "run: check its effect before calling it again",
                sent=True,
            )
        if isinstance(frame, Wrong):
            raise BrokerDown(
                f"brokerd answered {type(frame.frame).__name__}, not an answer to its request; the "
                "call may have run: check its effect before calling it again",
                sent=True,
            )
        if frame is END:
            raise BrokerDown(
                "brokerd closed the connection without an answer (it may have stopped while "
                "the call ran); the call's outcome is unknown: check before calling it again",
                sent=True,
            )
        if frame is not NEED_DATA:
            return frame  # type: ignore[return-value]
        client.receive_data(await stream.receive_some())
