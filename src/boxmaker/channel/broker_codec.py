"""The rules of a `broker.sock` connection, sans-IO, both sides in one place (SPEC section
14): the frames are `loop.sock`'s codec (one line of JSON, at most 1 MiB) read as
`BrokerFrame`; a connection carries one request and its one final answer.

A request and the answers it may get:

    list_tools                       -> tools
    call, approve, recall            -> response
    session_changed, session_removed -> noted
    any of them                      -> error (bad_frame: what brokerd could not read)

`BrokerdConnection` is brokerd's side: bytes in, the request (or a `BadFrame` saying what was
wrong: a bad line, a frame brokerd sends, more after the request), then one answer out, fitted
to a frame. `BrokerClient` is the other side (loopd's tool port, bxctl's `rm`): one request
out, bytes in, the answer; a `BadFrame` when what came is not a frame, `Wrong` when it is not
an answer to that request.
"""

from __future__ import annotations

import attrs

from ..proto import (
    ApproveFrame,
    BrokerFrame,
    CallFrame,
    ErrorCode,
    FailedResponse,
    ListToolsFrame,
    NotedFrame,
    RecallFrame,
    ResponseFrame,
    ResultResponse,
    SessionChangedFrame,
    SessionRemovedFrame,
    ToolsFrame,
    UndoFrame,
    UndoneFrame,
    UndoPreviewFrame,
    WireError,
    dumps,
    frame_kind,
)
from ..sansio import END, NEED_DATA, Signal
from .codec import MAX_FRAME, BadFrame, FrameDecoder, encode_frame

__all__ = [
    "ANSWERS",
    "BrokerClient",
    "BrokerRequest",
    "BrokerdConnection",
    "Wrong",
    "fitted",
]

BrokerRequest = (
    ListToolsFrame
    | CallFrame
    | ApproveFrame
    | RecallFrame
    | SessionChangedFrame
    | SessionRemovedFrame
    | UndoFrame
)
ANSWERS: dict[type, tuple[type, ...]] = {
    ListToolsFrame: (ToolsFrame, WireError),
    CallFrame: (ResponseFrame, WireError),
    ApproveFrame: (ResponseFrame, WireError),
    RecallFrame: (ResponseFrame, WireError),
    SessionChangedFrame: (NotedFrame, WireError),
    SessionRemovedFrame: (NotedFrame, WireError),
    UndoFrame: (UndoPreviewFrame, UndoneFrame, WireError),
}
MORE_AFTER_REQUEST = "more was sent after the request frame; a connection carries one"


class BrokerdConnection:
    """brokerd's side of one connection: `receive_data` and `next_request` until the request
    (or a `BadFrame`, or `END`: the peer left without a word); then `answer` once.

    Raises (from `answer`):
        RuntimeError: a second answer, or a frame that answers no request (brokerd's bug).
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._decoder = FrameDecoder(max_frame, frames=BrokerFrame)
        self._answered = False

    def receive_data(self, data: bytes | bytearray) -> None:
        self._decoder.receive_data(data)

    def next_request(self) -> BrokerRequest | BadFrame | Signal:
        frame = self._decoder.next_frame()
        if frame is NEED_DATA or frame is END or isinstance(frame, BadFrame):
            return frame
        if self._decoder.buffered():
            return BadFrame(MORE_AFTER_REQUEST)
        if type(frame) not in ANSWERS:
            return BadFrame(f"a {frame_kind(frame)!r} frame is sent by brokerd, not to it")
        return frame  # type: ignore[no-any-return]

    def refusal(self, said: BadFrame | Signal) -> BrokerFrame:
        """The answer to what was not a request."""
        if isinstance(said, BadFrame):
            return WireError(ErrorCode.BAD_FRAME, said.reason)
        return WireError(ErrorCode.BAD_FRAME, "the stream ended before a frame")

    def answer(self, frame: BrokerFrame) -> bytes:
        """`frame` fitted to one frame (`fitted`), as the bytes to write."""
        if self._answered:
            raise RuntimeError(f"a {frame_kind(frame)} frame after the answer")
        if not any(type(frame) in kinds for kinds in ANSWERS.values()):
            raise RuntimeError(f"a {frame_kind(frame)} frame answers no request")
        self._answered = True
        return encode_frame(fitted(frame))


def fitted(answer: BrokerFrame) -> BrokerFrame:
    """A result too long for one frame (its JSON escapes count) cut to fit, marked
    `truncated`; any other answer that cannot fit is refused in words (never a dropped
    connection, which loopd would have to call an unknown outcome)."""
    size = len(dumps(answer))
    if size < MAX_FRAME:
        return answer
    if isinstance(answer, ResponseFrame) and isinstance(answer.response, ResultResponse):
        cut = answer.response
        while size >= MAX_FRAME and cut.content:
            content = cut.content[: max(0, len(cut.content) * (MAX_FRAME - 4096) // size)]
            cut = attrs.evolve(cut, content=content, truncated=True)
            size = len(dumps(ResponseFrame(cut)))
        if size < MAX_FRAME:
            return ResponseFrame(cut)
    too_long = f"the answer is {size:,} bytes, over the {MAX_FRAME:,} a frame may carry"
    return ResponseFrame(FailedResponse(too_long))


class BrokerClient:
    """The side that asks: `send` one request, then `receive_data` and `next_answer` until
    the answer, a `BadFrame` (what came is not a frame), `Wrong` (a frame that does not answer
    the request), or `END` (brokerd closed the connection without an answer).

    Raises (from `send`):
        RuntimeError: a second request, or a frame that is not a request (the caller's bug).
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._decoder = FrameDecoder(max_frame, frames=BrokerFrame)
        self._request: BrokerRequest | None = None

    def send(self, request: BrokerRequest) -> bytes:
        if self._request is not None:
            raise RuntimeError("a connection carries one request")
        if type(request) not in ANSWERS:
            raise RuntimeError(f"a {frame_kind(request)} frame is not a request")
        self._request = request
        return encode_frame(request)

    def receive_data(self, data: bytes | bytearray) -> None:
        self._decoder.receive_data(data)

    def next_answer(self) -> BrokerFrame | BadFrame | Wrong | Signal:
        frame = self._decoder.next_frame()
        if frame is NEED_DATA or frame is END or isinstance(frame, BadFrame):
            return frame
        assert self._request is not None, "an answer before the request"
        if type(frame) not in ANSWERS[type(self._request)]:
            return Wrong(frame)
        return frame  # type: ignore[no-any-return]


@attrs.frozen
class Wrong:
    """A frame that is not an answer to the request sent: `frame` is what came."""

    frame: BrokerFrame
