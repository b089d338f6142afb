"""Memory as brokerd answers it (SPEC section 17): `remember` and `forget` write the notes,
`recall` searches the notes and every session's history, and auto-recall (loopd's `recall`
frame, before a turn's first request) gives only what passes the threshold.

brokerd keeps the recall index up to date in the background: every source at start, then a
session each time loopd says its log grew (`session_changed`), never on the way of a call. A
search first reads what the notes gained (a note `bxctl memory add` wrote a moment ago is
found). One index operation at a time (a `trio.Lock`), each in a worker thread; the notes'
appends take the notes file's own lock, which `bxctl memory` takes too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from ..clock import Clock
from ..config import MemoryConfig
from ..memory import (
    Found,
    NotesFile,
    RecallIndex,
    Updated,
    auto_kept,
    query_words,
    recalled,
    remembered,
    session_names,
    withdrawn,
)
from ..proto import (
    FailedResponse,
    NoteRecord,
    RecallFrame,
    ResultResponse,
    ToolRequest,
    ToolResponse,
)
from ..serving import blocking
from ..session import DEFAULT_TOKENS_PER_BYTE, SessionError
from ..tools import MEMORY_TOOLS, failed, local

__all__ = ["MEMORY", "RECALL_MOST", "Memory"]

log = logging.getLogger("brokerd")

MEMORY = frozenset(tool.name for tool in MEMORY_TOOLS)
RECALL_MOST = 5  # passages `recall` gives unless asked for more (its schema allows 20)
RECALL_CHARACTERS = 6000  # of a `recall` result (loopd caps it again at tool_result_cap)
AUTO_CANDIDATES = 20  # best passages an auto-recall weighs against its threshold
AUTO_MOST = 5

T = TypeVar("T")


class Memory:
    """The notes and the recall index of one home, as brokerd serves them."""

    def __init__(
        self, home: Path, clock: Clock, config: MemoryConfig, *, threads: bool = True
    ) -> None:
        self.home = home
        self.notes = NotesFile(home)
        self.index = RecallIndex(home)
        self.clock = clock
        self.config = config
        self._threads = threads  # else the index and the notes run in the event loop (tests)
        self._lock = trio.Lock()  # one index operation at a time
        self._due: dict[str, None] = {}  # sessions whose logs grew, in the order told
        self._wake = trio.Event()
        self._made = self.index.made
        self.refilling = -1  # sessions left to read into an index made anew (-1: none)
        self.updated = Updated()  # what the background updates did, for the status line

    def status(self) -> str:
        refill = f"; rebuilding, {self.refilling} sessions left" if self.refilling >= 0 else ""
        return (
            f"recall index: {self.updated.added} passages added, {len(self._due)} "
            f"sessions due{refill}"
        )

    # --- the index, kept up to date --------------------------------------------------------

    def changed(self, session: str) -> None:
        """`session`'s log grew: read it into the index soon (never now, on the caller's way)."""
        self._due[session] = None
        self._wake.set()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the index up to date until cancelled: every source at start, a session at a
        time (a call waits for one session's update at most, never for all of them), then
        each session loopd names; all again whenever the index was made anew (missing,
        stale, damaged)."""
        task_status.started()
        await self._refill()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if self.index.made != self._made:
                await self._refill()
            while self._due:
                session = next(iter(self._due))
                del self._due[session]
                await self._indexed(self.index.update_session, session)

    async def _refill(self) -> None:
        """Read every source into the index (each from where it stopped: at start, after a
        clean stop, that is only what changed since)."""
        self._made = self.index.made
        await self._indexed(self.index.update_notes)
        names = await self._blocking(session_names, self.home)
        for done, name in enumerate(reversed(names)):  # the newest ids (by name) first
            self.refilling = len(names) - done
            await self._indexed(self.index.update_session, name)
        await self._indexed(self.index.prune)
        self.refilling = -1

    async def _indexed(self, work: Callable[..., Updated], *args: Any) -> None:
        """One update of the index in the background; whatever goes wrong is logged, never
        the end of brokerd."""
        try:
            async with self._lock:
                done = await self._on_index(work, *args)
        except SessionError as error:
            log.warning("the recall index was not brought up to date: %s", error)
            return
        except Exception:  # a bug, or a file that defeats the reading: brokerd serves on
            log.exception("the recall index was not brought up to date")
            return
        self.updated += Updated(done.added, done.removed, done.read)
        for problem in done.problems:
            log.warning("%s", problem)

    async def _on_index(self, work: Callable[..., T], *args: Any) -> T:
        """`work` on the index (the caller holds the lock), in a worker thread, the index
        closed after it: brokerd holds no file of the home open for writing between two
        operations (a read-only remount of the home is refused while one is). An index made
        anew meanwhile is filled again in the background."""

        def closing() -> T:
            try:
                return work(*args)
            finally:
                self.index.close()

        try:
            return await self._blocking(closing)
        finally:
            if self.index.made != self._made:
                self._wake.set()

    async def _blocking(self, work: Callable[..., T], *args: Any) -> T:
        return await blocking(work, *args, threads=self._threads)

    # --- the tools ------------------------------------------------------------------------

    async def call(self, request: ToolRequest, arguments: dict[str, Any]) -> ToolResponse:
        """Answer `remember`, `forget` or `recall` (their arguments already checked against
        their schemas); a file that cannot be used is a failure saying which and why."""
        try:
            if request.tool == "remember":
                return await self._remember(
                    request, str(arguments["text"]), bool(arguments.get("pin", False))
                )
            if request.tool == "forget":
                return await self._forget(request, str(arguments["id"]))
            limit = int(arguments.get("limit", RECALL_MOST))
            return await self._recall(request, str(arguments["query"]), limit)
        except SessionError as error:
            return FailedResponse(f"{request.tool} failed: {error}")

    async def _remember(self, request: ToolRequest, text: str, pin: bool) -> ToolResponse:
        made = await self._blocking(
            self.notes.append,
            lambda notes: remembered(
                notes,
                text,
                pin,
                self.clock.now(),
                session=request.session,
                turn=request.turn,
                untrusted=request.tainted,
                secret=request.secret,
            ),
        )
        if not isinstance(made, NoteRecord):
            return failed(str(made))  # refused: nothing kept
        log.info("note %s kept (session %s, turn %s)", made.id, request.session, request.turn)
        where = (
            "pinned: it joins every new conversation, and every new part of one"
            if pin
            else "kept apart: the conversation holds a secret, so recall never gives it"
            if made.secret
            else "recall finds it"
        )
        return local(f"Kept as note {made.id} ({where}).")

    async def _forget(self, request: ToolRequest, id: str) -> ToolResponse:
        made = await self._blocking(
            self.notes.append,
            lambda notes: withdrawn(
                notes, id.strip(), self.clock.now(), session=request.session, turn=request.turn
            ),
        )
        if isinstance(made, str):
            return failed(made)  # no such note of this session
        log.info("note %s withdrawn (session %s, turn %s)", id, request.session, request.turn)
        return local(f"Note {made.id} is withdrawn: it is no longer recalled or pinned.")

    async def _recall(self, request: ToolRequest, query: str, limit: int) -> ToolResponse:
        words = query_words(query)
        if not words:
            return failed(
                "Give recall words to look for, not only common ones such as 'the' or 'what'."
            )
        found = await self._search(
            words, limit, request.session.value, request.first_turn or 0, own_summaries=True
        )
        said = recalled(" ".join(found.words), found.hits, RECALL_CHARACTERS)
        partial = (
            "\n(The recall index is being made again: earlier conversations may not be found yet.)"
            if self.refilling >= 0 or self.index.made != self._made
            else ""
        )
        if said.empty:
            return local(f'Nothing in memory matches "{" ".join(words)}".{partial}')
        return ResultResponse(said.text + partial, said.data_class, said.untrusted, False)

    async def auto_recall(self, frame: RecallFrame) -> ToolResponse:
        """What memory holds of a message (`frame.query`) that passes the threshold, within
        `[memory] recall_tokens`: an empty result when nothing does."""
        words = query_words(frame.query)
        try:
            found = await self._search(
                words, AUTO_CANDIDATES, frame.session.value, frame.first_turn, own_summaries=False
            )
        except SessionError as error:
            return FailedResponse(f"auto-recall failed: {error}")
        share = self.config.auto_recall_match
        kept = auto_kept(found.hits, found.weighed, share)[:AUTO_MOST]
        budget = int(self.config.recall_tokens / DEFAULT_TOKENS_PER_BYTE)  # an estimate
        said = recalled(" ".join(found.words), kept, budget)
        return ResultResponse(said.text, said.data_class, said.untrusted, truncated=False)

    async def _search(
        self, words: list[str], most: int, session: str, first_turn: int, *, own_summaries: bool
    ) -> Found:
        """The best passages (the notes read up to now first; the sessions as the background
        left them, a turn behind at most).

        Raises:
            SessionError: the index or the notes cannot be used.
        """

        def search() -> Found:
            for problem in self.index.update_notes().problems:
                log.warning("%s", problem)
            return self.index.search(
                words, most, session=session, first_turn=first_turn, own_summaries=own_summaries
            )

        async with self._lock:
            return await self._on_index(search)
