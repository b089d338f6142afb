"""A tool result in the log: cut to the cap with its whole text kept in the session's folder,
and any part of a kept result read back for `read_result` (tools/results.py holds the rules).
"""

from __future__ import annotations

from ..proto import ResultResponse, Timestamp, ToolCall, ToolResultRecord
from ..session import SessionError
from ..store import OpenSession
from ..tools import READ_RESULT, ReadBack, cap_result, local, read_back

__all__ = ["read_result", "result_record"]


def result_record(
    session: OpenSession, call: ToolCall, number: int, answer: ResultResponse, cap: int,
    now: Timestamp,
) -> ToolResultRecord:  # fmt: skip
    """The `tool_result` of call `number`: `answer` cut to `cap` bytes, its whole text kept
    first when it was cut (the marker names `read_result` when the session has it).

    Raises:
        StorageError: the whole text could not be kept.
    """
    readable = any(tool.name == READ_RESULT.name for tool in session.baseline.tools)
    result, cut = cap_result(answer, cap, number if readable else None)
    whole = session.keep_whole(number, answer.content) if cut else None
    return ToolResultRecord(
        time=now,
        call=number,
        tool_call_id=call.id,
        content=result.content,
        data_class=result.data_class,
        untrusted=result.untrusted,
        truncated=result.truncated,
        whole=whole,
    )


def read_result(session: OpenSession, asked: ReadBack, cap: int) -> ResultResponse:
    """The answer to `read_result`: the part asked for of a result of this epoch, whole when it
    was kept, else as the model got it; a sentence saying why when there is none."""
    record = next(
        (r for r in session.records if isinstance(r, ToolResultRecord) and r.call == asked.call),
        None,
    )
    if record is None:
        return local(f"No result numbered {asked.call} in this part of the conversation.")
    try:
        whole = session.read_whole(record)
    except SessionError as error:
        return local(f"Call {asked.call}'s whole result could not be read: {error}")
    if whole is None and record.whole is not None:
        return local(
            f"Call {asked.call}'s whole result is missing or was changed on disk; only what "
            "you were given of it is left."
        )
    return read_back(record, record.content if whole is None else whole, asked, cap)
