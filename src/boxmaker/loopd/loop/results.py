"""A tool result in the log: cut to the cap with its whole text kept in the session's folder
(and its attachments, an MCP tool's images, beside it), and any part of a kept result read
back for `read_result` (tools/results.py holds the rules).
"""

from __future__ import annotations

import base64
import binascii

from ...proto import Attachment, KeptPart, ResultResponse, Timestamp, ToolCall, ToolResultRecord
from ...session import SessionError
from ...store import OpenSession
from ...tools import READ_RESULT, ReadBack, cap_result, failed, read_back

__all__ = ["read_result", "result_record"]


def result_record(
    session: OpenSession,
    call: ToolCall,
    number: int,
    answer: ResultResponse,
    cap: int,
    now: Timestamp,
) -> ToolResultRecord:
    """The `tool_result` of call `number`: `answer` cut to `cap` bytes, its whole text kept
    first when it was cut (the marker names `read_result` when the session has it).

    Raises:
        StorageError: the whole text could not be kept.
    """
    readable = any(tool.name == READ_RESULT.name for tool in session.baseline.tools)
    result, cut = cap_result(answer, cap, number if readable else None)
    whole = session.keep_whole(number, answer.content) if cut else None
    kept = tuple(
        _keep(session, number, part, attachment)
        for part, attachment in enumerate(answer.attachments, 1)
    )
    return ToolResultRecord(
        time=now,
        call=number,
        tool_call_id=call.id,
        content=result.content,
        data_class=result.data_class,
        untrusted=result.untrusted,
        truncated=result.truncated,
        whole=whole,
        kept=tuple(part for part in kept if part is not None),
        is_error=answer.is_error,
    )


_EXTENSIONS = {  # a media type's file ending
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/svg+xml": "svg",
    "audio/wav": "wav",
    "audio/mpeg": "mp3",
    "application/pdf": "pdf",
    "application/zip": "zip",
    "text/plain": "txt",
}


def _keep(session: OpenSession, call: int, part: int, attachment: Attachment) -> KeptPart | None:
    """Keep an attachment beside the log (`results/<call>.<part>.<ext>`); None when its data is
    not base64 (brokerd checked it: this is a second look, never an error)."""
    try:
        data = base64.b64decode(attachment.data, validate=True)
    except (binascii.Error, ValueError):
        return None
    name = f"{call}.{part}.{_EXTENSIONS.get(attachment.mime, 'bin')}"
    return KeptPart(name, attachment.mime, session.keep_part(name, data))


def read_result(session: OpenSession, asked: ReadBack, cap: int) -> ResultResponse:
    """The answer to `read_result`: the part asked for of a result of this epoch, whole when it
    was kept, else as the model got it; a sentence saying why when there is none."""
    record = next(
        (r for r in session.records if isinstance(r, ToolResultRecord) and r.call == asked.call),
        None,
    )
    if record is None:
        return failed(f"No result numbered {asked.call} in this part of the conversation.")
    try:
        whole = session.read_whole(record)
    except SessionError as error:
        return failed(f"Call {asked.call}'s whole result could not be read: {error}")
    if whole is None and record.whole is not None:
        return failed(
            f"Call {asked.call}'s whole result is missing or was changed on disk; only what "
            "you were given of it is left."
        )
    return read_back(record, record.content if whole is None else whole, asked, cap)
