"""The frame codec of `loop.sock`, sans-IO: one frame is one line of UTF-8 JSON ending in
`\\n`, at most 1 MiB (SPEC section 7).

`FrameDecoder.receive_data(bytes)` feeds bytes (`b""` for the end of the stream);
`next_frame()` returns the next `Frame`, a `BadFrame` saying exactly what was wrong with a line,
`NEED_DATA`, or `END`. A line over the limit is refused as soon as it passes it, without
buffering the rest. The result is the same for any split of the input. `encode_frame` writes one.
"""

from __future__ import annotations

from attrs import frozen

from ..proto import DecodeError, Frame, dumps, loads
from ..sansio import END, NEED_DATA, Signal

__all__ = ["END", "MAX_FRAME", "NEED_DATA", "BadFrame", "FrameDecoder", "encode_frame"]

MAX_FRAME = 1024 * 1024  # bytes of one frame, without its newline


@frozen
class BadFrame:
    """A line that is not a frame; `reason` is the message of the `bad_frame` error."""

    reason: str


def encode_frame(frame: Frame) -> bytes:
    line = dumps(frame)
    if len(line) > MAX_FRAME:
        raise ValueError(f"a frame of {len(line)} bytes is over the {MAX_FRAME}-byte limit")
    return line + b"\n"


class FrameDecoder:
    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._max = max_frame
        self._buffer = bytearray()
        self._skipping = False  # inside a line already refused as too long
        self._ended = False
        self._scanned = 0  # the buffer's first bytes, known to hold no newline

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

    def next_frame(self) -> Frame | BadFrame | Signal:
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
            return _decode(line)


def _decode(line: bytes) -> Frame | BadFrame:
    if not line.strip():
        return BadFrame("an empty line is not a frame")
    try:
        frame: Frame = loads(Frame, line)
    except DecodeError as exc:
        return BadFrame(str(exc))
    return frame
