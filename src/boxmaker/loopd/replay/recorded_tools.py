"""brokerd and the owner, answered from the log (SPEC section 20): each call's response the
one its recorded result was made from, each approval the recorded answer."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import trio

from ... import layout
from ...proto import (
    Answer,
    ApprovalRecord,
    ApprovedBy,
    Attachment,
    DataClass,
    DeniedResponse,
    PendingApprovalResponse,
    RecallFrame,
    RecallRecord,
    ResultResponse,
    SessionId,
    ToolRequest,
    ToolResponse,
    ToolResultRecord,
    UserRecord,
)
from ..loop import Carried
from .errors import MissingInput
from .stand_ins import Cursor
from .tape import Place

__all__ = ["ReplayApprovals", "ReplayPort", "recorded_files"]


def recorded_files(folder: Path, place: Place, user: UserRecord) -> Carried | None:
    """The files the recorded message (`user`, at `place`) carried, each checked against its
    hash where the recording in `folder` keeps it, and kept from there by a run that makes
    a session of its own (`what_if`); None when it carried none.

    Raises:
        MissingInput: a file, or its text, is missing or changed since.
    """
    if not user.files:
        return None
    keep: list[tuple[str, Path | bytes]] = []
    for file in user.files:
        for sha in filter(None, (file.sha256, file.text)):
            path = layout.turn_file(folder, sha)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise MissingInput(place, f"the file {file.name!r}: {exc}") from exc
            if hashlib.sha256(data).hexdigest() != sha:
                raise MissingInput(place, f"the file {file.name!r} ({path} was changed since)")
            keep.append((sha, path))
    return Carried(user.files, user.attached, tuple(keep))


class ReplayPort:
    """brokerd: each call's response the one its recorded result was made from (a whole
    result read back from the recorded session's `results/`, with its attachments)."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor

    async def call(self, request: ToolRequest) -> ToolResponse:
        record = self.cursor.record()
        if isinstance(record, ApprovalRecord) and record.call == request.call:
            return PendingApprovalResponse(record.id, record.summary)
        return await self._result(request.call)

    async def approve(self, session: SessionId, id: str, answer: Answer) -> ToolResponse:
        record = self.cursor.record(-1)
        assert isinstance(record, ApprovalRecord)
        if answer is Answer.DENY:
            return DeniedResponse("the owner said no")
        return await self._result(record.call)

    async def auto_recall(self, frame: RecallFrame) -> ToolResponse:
        record = self.cursor.record()
        if not isinstance(record, RecallRecord):
            return ResultResponse("", DataClass.PUBLIC, untrusted=False, truncated=False)
        await trio.lowlevel.checkpoint()
        content = record.content
        if record.whole is not None:
            content = self._whole(record.call, record.whole)
        return ResultResponse(content, record.data_class, record.untrusted, False)

    async def session_changed(self, session: SessionId) -> None:
        await trio.lowlevel.checkpoint()

    async def _result(self, call: int) -> ToolResponse:
        record = self.cursor.record()
        if not isinstance(record, ToolResultRecord) or record.call != call:
            await self.cursor.stuck(f"the result of call {call}")
        await trio.lowlevel.checkpoint()
        folder = self.cursor.folder
        content = record.content
        if record.whole is not None:
            content = self._whole(call, record.whole)
        attachments = []
        for part in record.kept:
            path = layout.part_file(folder, part.file)
            try:
                data = path.read_bytes()
            except OSError as exc:
                error = MissingInput(self.cursor.place, f"call {call}'s attachment: {exc}")
                raise self.cursor.failed(error) from exc
            if hashlib.sha256(data).hexdigest() != part.sha256:
                changed = f"call {call}'s attachment ({path} was changed since)"
                raise self.cursor.failed(MissingInput(self.cursor.place, changed))
            attachments.append(Attachment(part.mime, base64.b64encode(data).decode()))
        truncated = record.truncated and record.whole is None
        return ResultResponse(
            content,
            record.data_class,
            record.untrusted,
            truncated,
            tuple(attachments),
            is_error=record.is_error,
        )

    def _whole(self, call: int, sha256: str) -> str:
        """Call `call`'s whole result as the recorded session keeps it."""
        path = layout.result_file(self.cursor.folder, call)
        try:
            data = path.read_bytes()
        except OSError as exc:
            error = MissingInput(self.cursor.place, f"call {call}'s whole result: {exc}")
            raise self.cursor.failed(error) from exc
        if hashlib.sha256(data).hexdigest() != sha256:
            changed = f"call {call}'s whole result ({path} was changed since)"
            raise self.cursor.failed(MissingInput(self.cursor.place, changed))
        return data.decode()


class ReplayApprovals:
    """The owner: each answer the recorded one (`None` for one that timed out)."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor

    def can_ask(self) -> bool:
        record = self.cursor.record()
        return isinstance(record, ApprovalRecord) and record.by is not ApprovedBy.NOBODY

    async def wait(
        self,
        session: SessionId,
        id: str,
        tool: str,
        summary: str,
        timeout: float,
        detail: str = "",
        only_once: bool = False,
    ) -> Answer | None:
        record = self.cursor.record()
        if not isinstance(record, ApprovalRecord):
            await self.cursor.stuck("the owner's answer")
        await trio.lowlevel.checkpoint()
        return record.answer if record.by is ApprovedBy.CHANNEL else None
