"""The frame codec of `loop.sock`, sans-IO: one frame is one line of UTF-8 JSON ending in
`\\n`, at most 1 MiB (SPEC section 7), and every rule of a connection in one object.

`FrameDecoder.receive_data(bytes)` feeds bytes (`b""` for the end of the stream);
`next_frame()` returns the next `Frame`, a `BadFrame` saying exactly what was wrong with a line,
`NEED_DATA`, or `END`. A line over the limit is refused as soon as it passes it, without
buffering the rest; so is an object that names a key twice. The result is the same for any
split of the input. `encode_frame` writes one; `split_frame` cuts a long text over several.

`LoopdConnection` is loopd's side of one connection, as h11's `Connection` is a server's: the
channel sends one `turn` frame and then only reads, and loopd sends events, then one final
frame. An `attach` frame is followed by its file's bytes, in `file_piece` frames, each read
back as a `Piece`, until the file is whole; then loopd sends its one final frame. Bytes in,
what they mean out; frames out, checked against where the connection is, as the bytes to
write.
"""

from __future__ import annotations

import base64
import binascii
import enum
from typing import Any

from attrs import frozen

from ..proto import (
    PIECE_BYTES,
    ApprovalFrame,
    AttachFrame,
    BrokerFrame,
    Content,
    DecodeError,
    DuplicateFrame,
    ErrorCode,
    FilePieceFrame,
    Frame,
    ListApprovalsFrame,
    ModeFrame,
    Reasoning,
    StopFrame,
    TurnDoneFrame,
    TurnDonePartFrame,
    TurnEventFrame,
    TurnFrame,
    UndoFrame,
    WatchFrame,
    WireError,
    dumps,
    frame_is_final,
    frame_kind,
    json_str,
    parse_json,
    structure,
)
from ..sansio import END, NEED_DATA, Signal

__all__ = [
    "END",
    "MAX_FRAME",
    "MORE_AFTER_TURN",
    "NEED_DATA",
    "BadFrame",
    "FrameDecoder",
    "LoopdConnection",
    "Piece",
    "Request",
    "Sending",
    "encode_frame",
    "split_frame",
]

MAX_FRAME = 1024 * 1024  # bytes of one frame, without its newline


@frozen
class BadFrame:
    """A line that is not a frame; `reason` is the message of the `bad_frame` error."""

    reason: str


def encode_frame(frame: Frame | BrokerFrame) -> bytes:
    line = dumps(frame)
    if len(line) > MAX_FRAME:
        raise ValueError(f"a frame of {len(line)} bytes is over the {MAX_FRAME}-byte limit")
    return line + b"\n"


_ROOM = 4096  # bytes of a frame left for everything but its long text
_WORST = 6  # bytes a character can take in JSON text (`\u001b`)


def split_frame(frame: Frame, max_frame: int = MAX_FRAME) -> list[Frame]:
    """`frame` as frames that each fit the limit, without losing a character.

    A `content` or `reasoning` event whose text is too long becomes several events of the
    same type (their texts concatenate, as deltas do); a `turn_done` whose content is too long
    becomes `turn_done_part` frames, then a `turn_done` with the last part (a `duplicate`'s
    answer likewise); an error message
    too long is cut (it is loopd's own sentence). Other frames are returned as they are.
    """
    match frame:
        case TurnEventFrame(event=Content(text=text) | Reasoning(text=text) as event):
            if len(text) * _WORST + _ROOM <= max_frame:
                return [frame]  # the common case, decided without encoding
            kind = type(event)
            return [TurnEventFrame(kind(text=piece)) for piece in _pieces(text, max_frame)]
        case TurnDoneFrame(content=text, usage=usage):
            if len(text) * _WORST + _ROOM <= max_frame:
                return [frame]
            *first, last = _pieces(text, max_frame)
            return [*map(TurnDonePartFrame, first), TurnDoneFrame(last, usage)]
        case DuplicateFrame(origin=origin, outcome=outcome, content=str(text)):
            if len(text) * _WORST + _ROOM <= max_frame:
                return [frame]
            *first, last = _pieces(text, max_frame)
            return [*map(TurnDonePartFrame, first), DuplicateFrame(origin, outcome, last)]
        case WireError(code=code, message=message) if len(dumps(frame)) > max_frame:
            cut = _pieces(message, max_frame)[0]
            return [WireError(code, cut[: len(cut) - 20] + " … (cut to fit a frame)")]
    return [frame]


def _pieces(text: str, max_frame: int) -> list[str]:
    """`text` cut into pieces of whole characters, each at most `max_frame - _ROOM` bytes once
    written as a JSON string, so that a frame holding one fits."""
    limit = max_frame - _ROOM
    pieces = []
    start = 0
    while start < len(text):
        end = min(len(text), start + limit)  # a character takes a byte at least
        while (size := len(json_str(text[start:end]).encode())) > limit:
            end = start + max(1, (end - start) * limit // size - 1)
        pieces.append(text[start:end])
        start = end
    return pieces or [""]


class FrameDecoder:
    """The frames of one stream, read as `frames` (a union: loop.sock's `Frame`, or
    broker.sock's `BrokerFrame`)."""

    def __init__(self, max_frame: int = MAX_FRAME, frames: Any = Frame) -> None:
        self._max = max_frame
        self._frames = frames
        self._buffer = bytearray()
        self._skipping = False  # inside a line already refused as too long
        self._ended = False
        self._scanned = 0  # the buffer's first bytes, known to hold no newline

    def buffered(self) -> int:
        """Bytes received and not yet returned as a frame (the start of a next frame)."""
        return len(self._buffer)

    def _find_newline(self) -> int:
        """Each byte is looked at once, however the input is split (a peer writing a byte at
        a time must not make loopd rescan the whole buffer for each)."""
        newline = self._buffer.find(b"\n", self._scanned)
        self._scanned = len(self._buffer) if newline < 0 else 0
        return newline

    def _clear(self) -> None:
        self._buffer.clear()
        self._scanned = 0

    def receive_data(self, data: bytes | bytearray) -> None:
        if self._ended:
            raise RuntimeError("data received after the end of the stream")
        if not data:
            self._ended = True
        else:
            self._buffer += data

    def next_frame(self) -> Any:
        """The next frame (of the union given), a `BadFrame`, `NEED_DATA` or `END`."""
        while True:
            newline = self._find_newline()
            if self._skipping:
                if newline < 0:
                    self._clear()
                    return END if self._ended else NEED_DATA
                del self._buffer[: newline + 1]
                self._skipping = False
                continue
            if newline < 0:
                if len(self._buffer) > self._max:
                    self._clear()
                    self._skipping = True
                    return BadFrame(f"a frame is over the {self._max}-byte limit")
                if self._ended:
                    if self._buffer:
                        self._clear()
                        return BadFrame("the stream ended in the middle of a frame (no newline)")
                    return END
                return NEED_DATA
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if len(line) > self._max:
                return BadFrame(f"a frame is over the {self._max}-byte limit")
            return _decode(line, self._frames)


def _decode(line: bytes, frames: Any) -> Any:
    if not line.strip():
        return BadFrame("an empty line is not a frame")
    try:
        return structure(parse_json(line, unique_keys=True), frames)
    except DecodeError as exc:
        return BadFrame(str(exc))


MORE_AFTER_TURN = (
    "more was sent after the turn frame; a connection carries one turn frame, then only reads "
    "(the turn is not run, or is cancelled)"
)


# What a connection may open with.
Request = (
    TurnFrame
    | ApprovalFrame
    | ListApprovalsFrame
    | WatchFrame
    | StopFrame
    | ModeFrame
    | UndoFrame
    | AttachFrame
)


@frozen
class Piece:
    """The next bytes of the file an `attach` brings; `last`: every byte of it has come."""

    data: bytes
    last: bool


def _piece(frame: object, left: int) -> Piece | BadFrame:
    """A `file_piece` frame's bytes, checked: base64, at most `PIECE_BYTES`, no more than the
    `left` bytes of the file still to come."""
    if not isinstance(frame, FilePieceFrame):
        return BadFrame(f"a file's bytes come in 'file_piece' frames, not {frame_kind(frame)!r}")
    try:
        data = base64.b64decode(frame.data, validate=True)
    except (binascii.Error, ValueError):
        return BadFrame("a file_piece's data is not base64")
    if not data or len(data) > min(PIECE_BYTES, left):
        most = min(PIECE_BYTES, left)
        return BadFrame(f"a file_piece holds 1 to {most} bytes here, not {len(data)}")
    return Piece(data, len(data) == left)


class Sending(enum.Enum):
    """Where loopd's side of a connection is: before the turn frame came, while the turn's
    events go out, or done (a final frame went out)."""

    AWAITING_TURN = "awaiting_turn"
    FILE = "file"  # an `attach` came: its file's pieces are read
    TURN = "turn"
    DONE = "done"


class LoopdConnection:
    """loopd's side of one `loop.sock` connection, sans-IO.

    `receive_data` and `next_event` read the channel: before the turn, the turn frame (or an
    `approval` or `list_approvals` frame, a connection's other requests; or a `BadFrame`: a
    bad line, a frame of a kind only loopd sends, or more bytes after the first frame),
    `NEED_DATA`, or `END` (it left without a word); once the turn runs, anything but the end
    of the stream is `BadFrame(MORE_AFTER_TURN)` and `END` is the channel leaving.
    `send` turns one frame into the bytes to write (a long text split over several frames):
    events only while the turn runs, then one final frame, after which nothing more.

    Raises (from `send`):
        RuntimeError: a frame that the connection's state does not allow (loopd's bug).
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._decoder = FrameDecoder(max_frame)
        self.state = Sending.AWAITING_TURN
        self.more_after_turn = False  # the channel sent something after its turn frame
        self._left = 0  # bytes of the attached file still to come

    def receive_data(self, data: bytes | bytearray) -> None:
        self._decoder.receive_data(data)

    def next_event(self) -> Request | Piece | BadFrame | Signal:
        if self.state is Sending.FILE:
            frame = self._decoder.next_frame()
            if frame is END or frame is NEED_DATA or isinstance(frame, BadFrame):
                return frame
            piece = _piece(frame, self._left)
            if isinstance(piece, Piece):
                self._left -= len(piece.data)
                if piece.last:
                    self.state = Sending.TURN  # the file is whole: only the answer is left
            return piece
        if self.state is not Sending.AWAITING_TURN:
            # After its turn frame the channel only reads: anything it sends is a mistake.
            if self._decoder.buffered():
                self.more_after_turn = True
                return BadFrame(MORE_AFTER_TURN)
            frame = self._decoder.next_frame()
            if frame is END or frame is NEED_DATA:
                return frame
            self.more_after_turn = True
            return BadFrame(MORE_AFTER_TURN)
        frame = self._decoder.next_frame()
        if isinstance(frame, AttachFrame) and frame.offer.size > 0:
            self.state, self._left = Sending.FILE, frame.offer.size
            return frame
        if isinstance(frame, Request):
            self.state = Sending.TURN
            if self._decoder.buffered():
                self.more_after_turn = True
                return BadFrame(MORE_AFTER_TURN)
            return frame
        if isinstance(frame, BadFrame | Signal):
            return frame
        kind = frame_kind(frame)
        return BadFrame(f"a {kind!r} frame is sent by loopd, not to it; send a 'turn' frame")

    def refuse(self, bad: BadFrame) -> bytes:
        """The `bad_frame` error for what the channel sent: the connection is done."""
        return self.send(WireError(ErrorCode.BAD_FRAME, bad.reason))

    def send(self, frame: Frame) -> bytes:
        if self.state is Sending.DONE:
            raise RuntimeError(f"a {frame_kind(frame)} frame after the final one")
        final = frame_is_final(frame)
        if not final and self.state is not Sending.TURN:
            raise RuntimeError(f"a {frame_kind(frame)} frame before the request")
        if final:
            self.state = Sending.DONE
        return b"".join(_encoded(part) for part in split_frame(frame))


def _encoded(frame: Frame) -> bytes:
    try:
        return encode_frame(frame)
    except ValueError as exc:  # split_frame fits every text; anything else is loopd's bug
        final = frame_is_final(frame)
        return encode_frame(WireError(ErrorCode.INTERNAL, str(exc))) if final else b""
