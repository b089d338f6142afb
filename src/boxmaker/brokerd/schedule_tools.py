"""Schedules as brokerd answers the model (SPEC section 19): `schedule` makes one for the
calling session (its identity: never another session's, nor a later one under its id),
`list_schedules` lists that session's, `cancel_schedule` cancels one of them. None of them
sees or touches another session's schedules.

A schedule acts later without its owner, so `schedule` is `ask` in the shipped policy, and is
asked whatever its grant while the conversation holds an untrusted result (`policy/decide.py`);
one made so is `tainted`, and its turns run tainted. A `when` that is wrong, past, or in a zone
not known is answered in words, and nothing is written. Appends take the file's lock in a
worker thread (bxctl and loopd take it too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ..clock import Clock
from ..config import SchedulesConfig
from ..proto import (
    CancelRecord,
    CreatedBy,
    FailedResponse,
    ScheduleRecord,
    SchedulesRecord,
    ToolRequest,
    ToolResponse,
)
from ..schedules import Book, Wanted, cancelled, machine_zone, made, next_shown, schedules_file
from ..serving import blocking
from ..session import SessionError
from ..tools import SCHEDULE_TOOLS, failed, local

__all__ = ["SCHEDULES", "Schedules"]

log = logging.getLogger("brokerd")

SCHEDULES = frozenset(tool.name for tool in SCHEDULE_TOOLS)
T = TypeVar("T")


class Schedules:
    """The schedules file of one home, as the model reaches it."""

    def __init__(
        self, home: Path, clock: Clock, config: SchedulesConfig, *, threads: bool = True
    ) -> None:
        self.file = schedules_file(home)
        self.clock = clock
        self.config = config
        self._threads = threads  # else the file is read in the event loop (tests)

    async def call(self, request: ToolRequest, arguments: dict[str, Any]) -> ToolResponse:
        """Answer one of the three (arguments already checked against their schemas); a file
        that cannot be used is a failure saying which and why."""
        try:
            if request.tool == "schedule":
                return await self._schedule(
                    request, str(arguments["when"]), str(arguments["message"])
                )
            if request.tool == "cancel_schedule":
                return await self._cancel(request, str(arguments["id"]))
            return await self._list(request)
        except SessionError as error:
            return FailedResponse(f"{request.tool} failed: {error}")

    async def _schedule(self, request: ToolRequest, when: str, message: str) -> ToolResponse:
        wanted = Wanted(
            when,
            self.config.tz or machine_zone(),
            message,
            CreatedBy.AGENT,
            request.session,
            request.identity,
            turn=request.turn,
            tainted=request.tainted,
        )
        now = self.clock.now()
        record = await self._blocking(
            self.file.append, lambda held: made(Book(held), wanted, now, self.config)
        )
        if not isinstance(record, ScheduleRecord):
            return failed(f"Nothing was scheduled: {record}.")
        log.info("schedule %s made (session %s, turn %s)", record.id, request.session, request.turn)
        entry = Book((record,)).entries[record.id]
        return local(
            f"Scheduled as {record.id} ({record.when}, {record.tz}); next: "
            f"{next_shown(entry, now.value)}. The message will come to this conversation "
            "then, marked as yours."
        )

    async def _cancel(self, request: ToolRequest, id: str) -> ToolResponse:
        now = self.clock.now()

        def decide(held: tuple[SchedulesRecord, ...]) -> SchedulesRecord | str:
            book = Book(held)
            entry = book.entries.get(id)
            if entry is not None and entry.record.identity != request.identity:
                return f"there is no schedule {id} of this session"
            return cancelled(book, id, now, request.session)

        record = await self._blocking(self.file.append, decide)
        if not isinstance(record, CancelRecord):
            return failed(f"Nothing was cancelled: {record}.")
        return local(f"Cancelled {id}: it never fires again.")

    async def _list(self, request: ToolRequest) -> ToolResponse:
        book = Book(await self._blocking(self.file.read))
        now, lines = self.clock.now().value, []
        entries = book.of_session(request.session, request.identity)
        for entry in entries:
            record = entry.record
            said = next_shown(entry, now)
            lines.append(f"{record.id}: {record.when} ({record.tz}), next {said}: {record.message}")
        listed = local("\n".join(lines) or "This conversation has no schedules.")
        # A message written under taint may carry planted words: it is untrusted here too.
        return attrs.evolve(listed, untrusted=any(e.record.tainted for e in entries))

    async def _blocking(self, work: Callable[..., T], *args: Any) -> T:
        return await blocking(work, *args, threads=self._threads)
