"""The sessions loopd holds open: at most 64 (or a quarter of loopd's file descriptors),
least recently used closed first, never one in a turn; each derived from disk and dropped
after a turn that ended in a storage or internal error, so memory never holds what the disk
does not. A new session is made here with its baseline, on the slot its id's hash picks
(among those on `[tiers] chat`'s server).
"""

from __future__ import annotations

import hashlib
import logging
import resource
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..config import Config
from ..memory import memory_reader
from ..profiles import Profile
from ..proto import SessionId
from ..serving import blocking
from ..session import NoSuchSession, SessionExists
from ..store import MemoryText, OpenSession, Store, read_baseline

__all__ = ["OpenSessions", "memory_of", "session_cache_size", "slot_for"]

T = TypeVar("T")
log = logging.getLogger("loopd")


class OpenSessions:
    def __init__(
        self,
        config: Config,
        store: Store,
        profiles: Mapping[str, Profile],
        busy: Callable[[SessionId], bool],
        size: int | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.profiles = profiles  # by server name; none: the core tools, natively
        self.open: OrderedDict[SessionId, OpenSession] = OrderedDict()
        self._busy = busy
        self._size = session_cache_size() if size is None else size
        self.threads = True  # else sessions open in the event loop (a test's choice)

    def __len__(self) -> int:
        return len(self.open)

    async def get(self, sid: SessionId, resume: bool) -> OpenSession:
        """The session `sid`, resumed (`resume`) or made.

        Raises:
            NoSuchSession: to resume one that does not exist.
            SessionExists: to make one that does.
            SessionError: the disk refused, or the files are not the session's.
        """
        cached = self.open.get(sid)
        if cached is not None and cached.moved():  # removed (bxctl rm) or replaced on disk
            self.drop(sid)
            cached = None
        if resume:
            if cached is not None:
                self.open.move_to_end(sid)
                return cached
            session = await self._resume(sid)
        else:
            if cached is not None or self.store.exists(sid):
                raise SessionExists(sid)
            session = await self._create(sid)
        session.defer_index = True  # written after the answer goes out
        self.open[sid] = session
        self._evict()
        return session

    async def _blocking(self, work: Callable[..., T], *args: Any) -> T:
        return await blocking(work, *args, threads=self.threads)

    async def _resume(self, sid: SessionId) -> OpenSession:
        if not self.store.exists(sid):
            raise NoSuchSession(sid)
        session = await self._blocking(self.store.resume, sid)
        if session.memory_problem is not None:  # a switch it finished kept the old memory
            log.warning("session %s: %s", sid, session.memory_problem)
        if (aside := session.set_aside) is not None:
            log.warning(
                "session %s: its last write was cut short (loopd stopped mid-write, or the "
                "power went); its %d bytes are kept in %s, and the session goes on from the "
                "write before",
                sid,
                aside.size,
                aside.path,
            )
        return session

    async def _create(self, sid: SessionId) -> OpenSession:
        config = self.config
        slot = slot_for(sid, config)
        profile = self.profiles.get(config.server_of(slot))
        system, core, memory = config.baseline.system, config.tools.core, self.store.memory
        baseline = await self._blocking(lambda: read_baseline(system, memory(), profile, core))
        mode = config.tools.mode
        session = await self._blocking(lambda: self.store.create(sid, baseline, slot, mode=mode))
        if session.remains is not None:
            log.warning(
                "session %s: its folder had no log (an unfinished creation, or the log was "
                "removed); what it held is kept in %s, and a new session starts",
                sid,
                session.remains,
            )
        return session

    def _evict(self) -> None:
        """Close the least recently used sessions past the cache's size, never one in a turn
        (while more than that many are, the cache holds them all)."""
        excess = len(self.open) - self._size
        if excess <= 0:
            return
        idle = [sid for sid in self.open if not self._busy(sid)][:excess]
        for sid in idle:
            self.open.pop(sid).close()

    def drop(self, sid: SessionId) -> None:
        session = self.open.pop(sid, None)
        if session is not None:
            session.close()

    def close(self) -> None:
        for session in self.open.values():
            session.close()
        self.open.clear()


def memory_of(config: Config) -> MemoryText:
    """The memory each new baseline holds (`core.md` and the pinned notes), read when the
    baseline is made; a damaged notes file is warned of and its pins left out."""
    return memory_reader(config.paths.home, config.memory.pinned_tokens, log.warning)


def slot_for(sid: SessionId, config: Config) -> str:
    """The slot a new session is pinned to, among the slots on `[tiers] chat`'s server (every
    slot when it is unset): the one when there is one, else one chosen by the session id's
    hash (stable, even, and nothing to remember). The session keeps it for its life, whatever
    the tier says later."""
    slots = sorted(config.chat_slots())
    if len(slots) == 1:
        return slots[0]
    digest = hashlib.sha256(sid.value.encode()).digest()
    return slots[int.from_bytes(digest[:8], "big") % len(slots)]


def session_cache_size() -> int:
    """64 open sessions, or a quarter of the process's file descriptors if that is fewer:
    each holds its log open, and idle ones must not starve the connections and new turns."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(1, min(64, soft // 4)) if soft != resource.RLIM_INFINITY else 64
