"""The wire between brokerd and a cell's interpreter (`cell_kernel.py`), sans-IO.

brokerd writes one request a cell, one line of JSON (`cell_request`): the code, the nonce,
the cell's name (`<number>@<interpreter>`), the most `values` may hold, and what brokerd
queued for the interpreter since its last cell: the values it is to keep (`keep`, each
`[cell, index, text]`) and the last shell output (`sh_last`). The interpreter writes what
the cell prints as it comes, `\\0bx-cut <nonce>\\n` after each top-level statement (what lies
between two cuts is one output), then the cell's end: `\\0bx-done <nonce> <length>\\n` and
`length` bytes of JSON, `{"value": ..., "type": ..., "error": ...}`. `CellReader` reads that:
bytes in (`b""` for the end of the stream), then `Printed` (bytes the cell printed, held back
only as long as they could be the start of a marker), `Cut`, `CellEnd` (its value, type and
error, the strings of the object), `Lost` (why the interpreter cannot go on) or `NEED_DATA`.
Every part is bounded: the length line by 12 bytes, the end by `MOST_DONE`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from ...sansio import NEED_DATA, Signal

__all__ = ["MOST_DONE", "CellEnd", "CellReader", "Cut", "Lost", "Printed", "cell_request"]

MOST_DONE = 1024 * 1024  # bytes of a cell's end (its value and traceback are cut before)
_SIZE_LINE = 12  # bytes of `<length>\n`, at most
_HELD = 24  # bytes held back beyond the marker's length, to find it across reads
NOT_AN_END = "the interpreter sent what is not a cell's end"
ENDED = "the interpreter ended"


@frozen
class Printed:
    data: bytes


@frozen
class Cut:
    """An output of the cell ended (the statement that printed it did)."""


@frozen
class CellEnd:
    fields: dict[str, str]  # "value", "type" and "error", those that are strings


@frozen
class Lost:
    reason: str


def cell_request(
    code: str,
    nonce: bytes,
    *,
    cell: str = "1@0",
    most: int = 0,
    keep: Sequence[tuple[str, int | str, str]] = (),
    sh_last: dict[str, Any] | None = None,
) -> bytes:
    """One cell's request: `code` to run as `cell`, `keep` to hold in `values` (at most
    `most` characters in all) and `sh_last` to bind first (None: leave it as it is)."""
    request: dict[str, Any] = {"code": code, "nonce": nonce.decode(), "cell": cell, "most": most}
    if keep:
        request["keep"] = [list(kept) for kept in keep]
    if sh_last is not None:
        request["sh_last"] = sh_last
    return json.dumps(request).encode() + b"\n"


class CellReader:
    """One cell's output and end, as the interpreter writes them after `nonce`'s request."""

    def __init__(self, nonce: bytes) -> None:
        self._marker = b"\0bx-done " + nonce + b" "
        self._cut = b"\0bx-cut " + nonce + b"\n"
        self._pending = bytearray()
        self._ended = False
        self.marked = False  # the cell's end began: what it printed is all in
        self._size: int | None = None  # the end's length, once its line came

    def receive_data(self, data: bytes | bytearray) -> None:
        if not data:
            self._ended = True
        self._pending += data

    def next_event(self) -> Printed | Cut | CellEnd | Lost | Signal:
        if not self.marked:
            at, cut = self._pending.find(self._marker), self._pending.find(self._cut)
            if cut >= 0 and (at < 0 or cut < at):
                if cut > 0:
                    return self._take(cut)
                del self._pending[: len(self._cut)]
                return Cut()
            if at < 0:
                return self._printed() or (Lost(ENDED) if self._ended else NEED_DATA)
            if at > 0:
                return self._take(at)
            del self._pending[: len(self._marker)]
            self.marked = True
        if self._size is None:
            if isinstance(size := self._size_line(), Lost):
                return size
            if size is None:
                return Lost(NOT_AN_END) if self._ended else NEED_DATA
            self._size = size
        return self._end(self._size)

    def _printed(self) -> Printed | None:
        keep = len(self._marker) + _HELD  # the longer marker's (a cut's is one byte shorter)
        return self._take(len(self._pending) - keep) if len(self._pending) > keep else None

    def _take(self, count: int) -> Printed:
        data = bytes(self._pending[:count])
        del self._pending[:count]
        return Printed(data)

    def _size_line(self) -> int | Lost | None:
        """The end's length, once its line came (None: not yet)."""
        newline = self._pending.find(b"\n", 0, _SIZE_LINE)
        if newline < 0:
            return Lost(NOT_AN_END) if len(self._pending) > _SIZE_LINE else None
        text = bytes(self._pending[:newline])
        del self._pending[: newline + 1]
        size = int(text) if text.isdigit() else MOST_DONE + 1
        if size > MOST_DONE:
            return Lost("the interpreter sent a cell's end too long to take")
        return size

    def _end(self, size: int) -> CellEnd | Lost | Signal:
        if len(self._pending) < size:
            return Lost(ENDED) if self._ended else NEED_DATA
        try:
            end = json.loads(bytes(self._pending[:size]))
        except (ValueError, RecursionError):  # a cell may write any end, nested past the stack
            return Lost(NOT_AN_END)
        if not isinstance(end, dict):
            return Lost(NOT_AN_END)
        return CellEnd({k: _text(v) for k, v in end.items() if isinstance(v, str)})


def _text(value: str) -> str:
    """`value` as text that can be written as UTF-8: a lone surrogate (`raise
    ValueError("\\ud800")` puts one in a traceback, and JSON carries it) is shown escaped."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")
