"""A tool result too long for the model, cut so that nothing is lost, and read back. Pure.

A result over `[loop] tool_result_cap` bytes keeps its head and its tail (where a failed build
or a test run says what went wrong), with a marker between them saying how many bytes were
left out; the whole text is kept in the session's folder, its hash in the `tool_result`
record. `read_result {call, offset?, limit?}` then gives the model any part of it, counted in
characters of the whole result, never more than the cap at once: the call that made it is
never run again to see its output.
"""

from __future__ import annotations

from typing import Any

import attrs
from attrs import frozen

from ..proto import ResultResponse, ToolResultRecord

__all__ = ["ReadBack", "cap_result", "marker", "read_back"]


@frozen
class ReadBack:
    """A `read_result` call, checked: loopd answers it from the session's results."""

    call: int
    offset: int = 0
    limit: int | None = None

    @classmethod
    def of(cls, arguments: dict[str, Any]) -> ReadBack:
        """From arguments that fit `READ_RESULT`'s schema."""
        return cls(arguments["call"], arguments.get("offset", 0), arguments.get("limit"))


def marker(left_out: int, call: int | None, at: int) -> str:
    """What stands where a cut result's middle was: how much, and how to read it (when the
    session has `read_result`; `at` is where the left-out part starts, in characters)."""
    how = f'; read_result {{"call": {call}, "offset": {at}}} reads it' if call is not None else ""
    return f"\n[... {left_out:,} bytes left out{how} ...]\n"


def cap_result(
    result: ResultResponse, cap: int, call: int | None = None
) -> tuple[ResultResponse, bool]:
    """At most `cap` bytes of UTF-8 of the content, and whether it was cut: the first half and
    the last of them, each cut at a character boundary, with the `marker` between (naming
    `call` for `read_result`), and `truncated: true` (which also stays set when the port cut
    it already)."""
    data = result.content.encode()
    if len(data) <= cap:
        return result, False
    head = data[: cap // 2].decode(errors="ignore")
    tail = data[len(data) - (cap - cap // 2) :].decode(errors="ignore")
    left_out = len(data) - len(head.encode()) - len(tail.encode())
    content = head + marker(left_out, call, len(head)) + tail
    cut = ResultResponse(content, result.data_class, result.untrusted, truncated=True)
    return attrs.evolve(cut, is_error=result.is_error), True


def read_back(record: ToolResultRecord, whole: str, asked: ReadBack, cap: int) -> ResultResponse:
    """The part of call `record.call`'s `whole` result `asked` for, at most `cap` bytes with its
    heading; of the class and trust of the result it is part of (a part of an untrusted
    result stays untrusted)."""
    total = len(whole)
    if asked.offset >= total:
        text = (
            f"Call {record.call}'s result has {total:,} characters; offset {asked.offset} is "
            "past its end."
        )
    else:
        end = total if asked.limit is None else min(total, asked.offset + asked.limit)
        part = whole[asked.offset : end]
        room = cap - 120  # the heading's room
        data = part.encode()
        if len(data) > room:
            part = data[: max(room, 0)].decode(errors="ignore")
            end = asked.offset + len(part)
        rest = f"; the rest from offset {end}" if end < total else ""
        text = (
            f"Characters {asked.offset} to {end} of {total:,} of call {record.call}'s result"
            f"{rest}:\n{part}"
        )
    return ResultResponse(text, record.data_class, record.untrusted, truncated=False)
