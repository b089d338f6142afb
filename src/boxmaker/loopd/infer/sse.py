"""A sans-IO decoder of server-sent events: bytes in, `data` payloads out.

Strategy (as h11's `Connection`): `receive_data(chunk)` feeds bytes, `receive_data(b"")` says
the stream ended, and `next_event()` returns the next payload, `NEED_DATA` when it needs more
bytes, or `END` once the stream ended and everything was returned. Lines may end in `\\n`,
`\\r\\n` or `\\r`; `:` lines are comments (llama-server's keep-alive pings); fields other than
`data` are ignored; several `data` lines of one event are joined with `\\n`. An event not closed
by a blank line when the stream ends is dropped, as the SSE standard says; the caller notices
the missing `[DONE]`. A line, or an event's data, longer than `max_line` bytes is an error as
soon as it passes the limit: a server that never ends a line cannot fill loopd's memory. The
result is the same for any split of the input.
"""

from __future__ import annotations

from ...sansio import END, NEED_DATA, Signal

__all__ = ["END", "MAX_LINE", "NEED_DATA", "SSEDecoder", "SSEError"]

# llama-server sends a delta of one token per event; 4 MiB holds a delta over 1 MiB of text
# even written with JSON escapes, which the channel then splits over several frames.
MAX_LINE = 4 * 1024 * 1024


class SSEError(ValueError):
    """The bytes are not server-sent events (not UTF-8, or a line over the limit)."""


class SSEDecoder:
    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._max = max_line
        self._buffer = bytearray()
        self._start = 0  # where the unread part of the buffer begins
        self._scanned = 0  # the unread part's first bytes, known to hold no line end
        self._data: list[str] = []
        self._data_size = 0  # bytes in `_data`
        self._ended = False

    def receive_data(self, data: bytes) -> None:
        """Feed bytes; `b""` means the stream ended."""
        if self._ended:
            raise RuntimeError("data received after the end of the stream")
        if not data:
            self._ended = True
            return
        if self._start:
            del self._buffer[: self._start]
            self._scanned = max(0, self._scanned - self._start)
            self._start = 0
        self._buffer += data

    def next_event(self) -> str | Signal:
        """The next `data` payload, or `NEED_DATA`, or `END`.

        Raises:
            SSEError: a line that is not UTF-8, or a line or event over the limit.
        """
        while (line := self._next_line()) is not None:
            if not line:
                if self._data:
                    payload = "\n".join(self._data)
                    self._data = []
                    self._data_size = 0
                    return payload
                continue
            if line[0] == 0x3A:  # b":", a comment
                continue
            name, _, value = line.partition(b":")
            if name == b"data":
                if value[:1] == b" ":
                    value = value[1:]
                self._data_size += len(value) + 1
                if self._data_size > self._max:
                    raise SSEError(f"an event's data is over the {self._max}-byte limit")
                try:
                    self._data.append(value.decode())
                except UnicodeDecodeError as exc:
                    raise SSEError(f"a data line is not UTF-8: {exc}") from exc
        if len(self._buffer) - self._start > self._max:
            raise SSEError(f"a line is over the {self._max}-byte limit without its end")
        return END if self._ended else NEED_DATA

    def _next_line(self) -> bytes | None:
        buffer, start = self._buffer, self._start
        scan = max(start, self._scanned)  # each byte looked at once, however the input is split
        newline = buffer.find(b"\n", scan)
        carriage = buffer.find(b"\r", scan, newline if newline >= 0 else len(buffer))
        self._scanned = 0
        if carriage >= 0:
            if carriage + 1 == len(buffer) and not self._ended:
                return None  # a "\n" may follow in the next chunk
            end = carriage
            self._start = carriage + 2 if buffer[carriage + 1 : carriage + 2] == b"\n" else end + 1
        elif newline >= 0:
            end = newline
            self._start = newline + 1
        else:
            self._scanned = len(buffer)
            return None  # an unfinished line; at the end of the stream it is dropped
        return bytes(buffer[start:end])
