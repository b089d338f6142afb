"""Exactly once: what loopd knows of each session's origins, so that a message it already has
(run, running, or waiting in the mailbox) is answered `duplicate` and never run again.

An origin is looked for, in order: among the turns that ended since loopd started (noted the
moment each ends, before anything else can happen), in the session's mailbox (running or
waiting), then in the origin index beside the log (`store.OriginIndex`, brought forward in a
worker thread first), whose place is read back from the log. A turn frame with an origin is
checked and then put in the mailbox under the session's lock here, so two frames of one
origin can never both pass. A session's index that cannot be read refuses the frame
(`internal`) rather than risk running a message twice.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TypeVar

import trio

from ..proto import Origin, SessionId
from ..serving import blocking
from ..session import Recorded, SessionError
from ..store import OriginIndex, Store

__all__ = ["OriginBook", "OriginsUnreadable"]

T = TypeVar("T")
KEPT = 64  # sessions whose origins are kept in memory (more while that many are in use)


class OriginsUnreadable(Exception):
    """A session's origin index (or its log) could not be read; the message says why."""


class _Book:
    def __init__(self, index: OriginIndex) -> None:
        self.index = index
        self.lock = trio.Lock()
        # Turns that ended since loopd started, with the session's folder then: a session
        # removed and made again under the id has none of them.
        self.ended: dict[Origin, tuple[str, Recorded]] = {}


class OriginBook:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._books: OrderedDict[SessionId, _Book] = OrderedDict()
        self.threads = True  # else the index is read in the event loop (a test's choice)

    @asynccontextmanager
    async def held(self, sid: SessionId) -> AsyncIterator[None]:
        """The session's origins, for one frame's check and its entry into the mailbox."""
        book = self._book(sid)
        async with book.lock:
            yield

    async def known(
        self, sid: SessionId, origin: Origin, where: Callable[[Origin], str | None]
    ) -> Recorded | None:
        """How the session's message of `origin` went, if it has one: `where` says whether
        the mailbox holds it (`running`, `waiting`). Call it under `held(sid)`.

        Raises:
            OriginsUnreadable: the index or a log could not be read.
        """
        book = self._book(sid)
        await self._thread(book.index.refresh)
        for known in [o for o in book.ended if book.index.find(o) is not None]:
            del book.ended[known]  # the index has it now: what is kept stays small
        while True:  # no checkpoint until a place has to be read
            ended = book.ended.get(origin)
            if ended is not None and ended[0] == book.index.folder_id:
                return ended[1]
            if (state := where(origin)) is not None:
                return Recorded(state)
            place = book.index.find(origin)
            if place is None:
                return None
            found = await self._thread(partial(book.index.recorded, origin, place))
            if found is not None:
                return found

    async def of_channel(self, sid: SessionId, channel: str) -> list[Origin]:
        """The origins of `channel` the session's logs hold, as its index says (each is
        checked with `known` before it is believed). Call it under `held(sid)`.

        Raises:
            OriginsUnreadable: the index or a log could not be read.
        """
        book = self._book(sid)
        await self._thread(book.index.refresh)
        return book.index.of_channel(channel)

    def ended(
        self, sid: SessionId, identity: str, origins: list[Origin], recorded: Recorded
    ) -> None:
        """Turns of these origins ended so (their records are in the log) in the session of
        `identity` (the open session's own: nothing is read for it)."""
        book = self._book(sid)
        for origin in origins:
            book.ended[origin] = (identity, recorded)

    def _book(self, sid: SessionId) -> _Book:
        book = self._books.get(sid)
        if book is None:
            book = self._books[sid] = _Book(OriginIndex(self._store.fs, self._store.folder(sid)))
            idle = [s for s, b in self._books.items() if not b.lock.locked() and s != sid]
            for old in idle[: max(0, len(self._books) - KEPT)]:
                del self._books[old]
        self._books.move_to_end(sid)
        return book

    async def _thread(self, work: Callable[[], T]) -> T:
        try:
            return await blocking(work, threads=self.threads)
        except (OSError, ValueError, SessionError) as error:
            message = f"the session's origin index could not be read: {error}"
            raise OriginsUnreadable(message) from error
