"""What `loopd` does with one `turn` frame: open or create the session, run the turn, and
answer with `turn_done` or an `error` whose code a channel can act on (SPEC sections 7 and 8).

One `Daemon` is shared by every connection. It holds the one `Client` (whose per-slot gates
serialise requests), the tool port, a mailbox per session in a turn
(`mailbox.py`: a turn for a busy session waits there, steers the running turn, or is refused
with `session_busy`), and a small cache of open sessions (at most 64, or a quarter of loopd's
file descriptors) — derived from disk, dropped after any turn that ended in a storage or
internal error, so memory never holds what the disk does not.
"""

from __future__ import annotations

import hashlib
import logging
import resource
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

import trio
from attrs import define

from .. import layout
from ..clock import Clock
from ..config import Config
from ..memory import memory_reader
from ..profiles import Profile
from ..proto import (
    ErrorCode,
    QueuedMessage,
    SessionId,
    TurnDoneFrame,
    TurnEndRecord,
    TurnFrame,
    WireError,
)
from ..session import NoSuchSession, SessionError, SessionExists, StorageError
from ..store import MemoryText, OpenSession, Store, read_baseline
from ..tools import ToolPort
from .cache import ServerWatch, SlotCache
from .infer import Client, Servers
from .loop import InferFailed, OnTurnEvent, Runtime, SessionFailed, SessionFull, TurnLimit, run_turn
from .mailbox import Final, Letter, Mailbox, Running

__all__ = ["Daemon", "Deliver", "memory_of"]

log = logging.getLogger("loopd")

Deliver = Callable[[TurnDoneFrame | WireError], Awaitable[None]]
_GUESSES = (ErrorCode.NO_SUCH_SESSION.value, ErrorCode.SESSION_EXISTS.value)


class Daemon:
    def __init__(
        self,
        config: Config,
        client: Client | Servers,
        port: ToolPort,
        clock: Clock,
        *,
        store: Store | None = None,
        cache_size: int | None = None,
        profiles: Mapping[str, Profile] | None = None,
    ) -> None:
        self.config = config
        self.profiles = dict(profiles or {})  # by server name; none: the core tools, natively
        self.watch = ServerWatch(client, layout.server_state(config.paths.home))
        self.slot_cache: SlotCache | None = None
        if (save_dir := config.cache.save_dir) is not None:
            self.slot_cache = SlotCache(client, self.watch, save_dir, config.cache.max_bytes)
        self.runtime = Runtime(config, client, port, clock, self.slot_cache or self.watch)
        self.store = store or Store(config.paths.home, clock, memory=memory_of(config))
        self._boxes: dict[SessionId, Mailbox] = {}
        self._sessions: OrderedDict[SessionId, OpenSession] = OrderedDict()
        self._cache_size = session_cache_size() if cache_size is None else cache_size
        self._changed: dict[SessionId, None] = {}  # logs grown since brokerd was told, in order
        self._told = trio.Event()

    def busy(self, sid: SessionId) -> bool:
        """Whether a turn holds the session (running, or called to run)."""
        box = self._boxes.get(sid)
        return box is not None and not box.idle

    def status(self) -> str:
        """What the daemon holds now, for a status line."""
        running = sum(not box.idle for box in self._boxes.values())
        return f"{running} turns running; {len(self._sessions)} sessions open"

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()

    async def turn(self, frame: TurnFrame, on_event: OnTurnEvent, deliver: Deliver) -> None:
        """Run the turn a channel asked for and `deliver` its final frame: `turn_done`, or a
        `WireError` for every failure. For a session in a turn, the message waits in its
        mailbox first (or is refused with `session_busy`); a soft break taken into the
        running turn gets that turn's final frame. The turn's log line is written after the
        delivery, so it never delays the answer. Only cancellation (the channel went away)
        propagates."""
        sid = frame.session
        box = self._boxes.setdefault(sid, Mailbox())
        running = (
            box.hold(on_event) if box.idle else await self._wait(box, frame, on_event, deliver)
        )
        if running is None:
            return  # refused, or answered by the turn it joined
        started = trio.current_time()
        figures = _Figures()
        outcome = "cancelled"
        answer: Final = WireError(
            ErrorCode.CANCELLED,
            "the turn was cancelled: the channel that started it left, or loopd is stopping",
        )
        try:
            try:
                with running.scope:  # cancelled by a hard break
                    answer = await self._turn(frame, running.emit, figures, box)
                if running.scope.cancelled_caught:
                    answer = WireError(
                        ErrorCode.BREAK_HARD,
                        "the turn was stopped by a hard break; the message that broke it runs next",
                    )
            finally:
                box.finish(running, answer)
                self._forget(sid, box)
                elapsed = trio.current_time() - started
            outcome = "done" if isinstance(answer, TurnDoneFrame) else answer.code.value
            await deliver(answer)
            _flush_index(figures.session)
            if figures.session is not None:
                self.changed(sid)
        finally:
            # A channel's resume-or-create guess is expected, not an event of note.
            level = logging.DEBUG if outcome in _GUESSES else logging.INFO
            log.log(level, "turn %s: %s in %.2f s%s", sid, outcome, elapsed, figures)

    async def _wait(
        self, box: Mailbox, frame: TurnFrame, on_event: OnTurnEvent, deliver: Deliver
    ) -> Running | None:
        """Wait in the session's mailbox until called to run (the turn to run), or answered by
        the turn this soft break joined, or refused (None: delivered here)."""
        refusal = box.refusal(frame, str(frame.session))
        if refusal is not None:
            await deliver(WireError(ErrorCode.SESSION_BUSY, refusal))
            return None
        letter = Letter(frame, on_event)
        on_event(QueuedMessage(ahead=box.post(letter)))
        try:
            await letter.woken.wait()
        except BaseException:  # the channel left
            box.leave(letter)
            self._forget(frame.session, box)
            raise
        if letter.answer is not None:
            await deliver(letter.answer)
            return None
        assert box.running is not None
        return box.running

    def changed(self, sid: SessionId) -> None:
        """The session's log grew: brokerd is told soon (`tell_broker`), for its recall index."""
        self._changed[sid] = None
        self._told.set()

    async def tell_broker(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Tell brokerd of each session whose log grew, one at a time, in the background
        (never on a turn's way). One it cannot be told of is dropped with a warning: brokerd
        reads every session when it starts, and this one again after its next turn."""
        task_status.started()
        while True:
            await self._told.wait()
            self._told = trio.Event()
            while self._changed:
                sid = next(iter(self._changed))
                del self._changed[sid]
                try:
                    await self.runtime.port.session_changed(sid)
                except Exception as error:  # brokerd down or stopping: it catches up later
                    log.debug("brokerd was not told that %s changed: %s", sid, error)

    def _forget(self, sid: SessionId, box: Mailbox) -> None:
        if box.idle and self._boxes.get(sid) is box:
            del self._boxes[sid]

    async def _turn(
        self, frame: TurnFrame, on_event: OnTurnEvent, figures: _Figures, box: Mailbox
    ) -> TurnDoneFrame | WireError:
        sid = frame.session
        try:
            session = await self._open(sid, frame.resume)
            if not session.hold():
                return WireError(
                    ErrorCode.SESSION_BUSY,
                    f"another process holds session {sid}'s log (bxctl rm?); send this again",
                )
            figures.session, figures.turns = session, session.index.turns
            log.debug("turn %s: user: %s", sid, frame.content)
            try:
                result = await run_turn(
                    session,
                    self.runtime,
                    frame.content,
                    on_event,
                    thinking=frame.thinking,
                    steer=box,
                    new_epoch=frame.new_epoch,
                    can_ask=frame.can_ask,
                )
            finally:
                session.release()
            if self.slot_cache is not None:  # saved in the background, the slot idle
                prompt = result.usage.cache_n + result.usage.prompt_n
                messages = session.request_messages()
                self.slot_cache.after_turn(str(sid), session.slot, messages, prompt)
            log.debug("turn %s: answer: %s", sid, result.content)
            return TurnDoneFrame(content=result.content, usage=result.usage)
        except NoSuchSession:
            return WireError(
                ErrorCode.NO_SUCH_SESSION,
                f"no session {sid}; send the turn with resume: false to create it",
            )
        except SessionExists:
            return WireError(
                ErrorCode.SESSION_EXISTS,
                f"session {sid} already exists; send the turn with resume: true to continue it",
            )
        except SessionFull as error:
            return WireError(ErrorCode.SESSION_FULL, str(error))
        except TurnLimit as error:
            return WireError(ErrorCode.TURN_LIMIT, f"the turn was stopped: {error}")
        except InferFailed as error:
            return WireError(ErrorCode.INFERENCE, str(error))
        except (SessionFailed, SessionError) as error:
            self._drop(sid)
            log.error("turn %s: %s", sid, error)
            return WireError(ErrorCode.INTERNAL, str(error))
        except Exception as error:  # a bug: answer the channel, keep serving the others
            self._drop(sid)
            log.exception("turn %s: internal error", sid)
            return WireError(ErrorCode.INTERNAL, f"internal error: {type(error).__name__}: {error}")

    async def _open(self, sid: SessionId, resume: bool) -> OpenSession:
        cached = self._sessions.get(sid)
        if cached is not None and cached.moved():  # removed (bxctl rm) or replaced on disk
            self._drop(sid)
            cached = None
        if resume:
            if cached is not None:
                self._sessions.move_to_end(sid)
                return cached
            if not self.store.exists(sid):
                raise NoSuchSession(sid)
            session = await trio.to_thread.run_sync(self.store.resume, sid)
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
        else:
            if cached is not None or self.store.exists(sid):
                raise SessionExists(sid)
            config = self.config
            slot = slot_for(sid, config)
            profile = self.profiles.get(config.server_of(slot))
            system, core, memory = config.baseline.system, config.tools.core, self.store.memory
            baseline = await trio.to_thread.run_sync(
                lambda: read_baseline(system, memory(), profile, core)
            )
            session = await trio.to_thread.run_sync(self.store.create, sid, baseline, slot)
            if session.remains is not None:
                log.warning(
                    "session %s: its folder had no log (an unfinished creation, or the log was "
                    "removed); what it held is kept in %s, and a new session starts",
                    sid,
                    session.remains,
                )
        session.defer_index = True  # written after the answer goes out (`turn`)
        self._sessions[sid] = session
        self._evict()
        return session

    def _evict(self) -> None:
        """Close the least recently used sessions past the cache's size, never one in a turn
        (while more than that many are, the cache holds them all)."""
        excess = len(self._sessions) - self._cache_size
        if excess <= 0:
            return
        idle = [sid for sid in self._sessions if not self.busy(sid)][:excess]
        for sid in idle:
            self._sessions.pop(sid).close()

    def _drop(self, sid: SessionId) -> None:
        session = self._sessions.pop(sid, None)
        if session is not None:
            session.close()


def _flush_index(session: OpenSession | None) -> None:
    """The turn's `index.json`, once its answer went out; a failure is a warning (the log,
    which is durable, outranks it; the next turn's end writes it again)."""
    if session is None:
        return
    try:
        session.flush_index()
    except StorageError as error:
        log.warning("session %s: %s", session.id, error)


def memory_of(config: Config) -> MemoryText:
    """The memory each new baseline holds (`core.md` and the pinned notes), read when the
    baseline is made; a damaged notes file is warned of and its pins left out."""
    return memory_reader(config.paths.home, config.memory.pinned_tokens, log.warning)


def slot_for(sid: SessionId, config: Config) -> str:
    """The slot a new session is pinned to: `main` when it is the only one, else one of the
    slots chosen by the session id's hash (stable, even, and nothing to remember)."""
    slots = sorted(config.slots)
    if len(slots) == 1:
        return slots[0]
    digest = hashlib.sha256(sid.value.encode()).digest()
    return slots[int.from_bytes(digest[:8], "big") % len(slots)]


def session_cache_size() -> int:
    """64 open sessions, or a quarter of the process's file descriptors if that is fewer:
    each holds its log open, and idle ones must not starve the connections and new turns."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(1, min(64, soft // 4)) if soft != resource.RLIM_INFINITY else 64


@define
class _Figures:
    """What a turn did, for its log line: its `turn_end`'s completions and tool calls, and the
    cache on its last completion."""

    session: OpenSession | None = None
    turns: int = 0  # the session's turns before this one

    def __str__(self) -> str:
        session = self.session
        if session is None or session.index.turns == self.turns:
            return ""  # the turn left nothing (a message that did not fit, a failed switch)
        end, usage = session.records[-1], session.last_usage()
        if not isinstance(end, TurnEndRecord) or not end.completions or usage is None:
            return ""
        return (
            f"; {end.completions} completions, {end.tool_calls} tool calls; last prompt "
            f"{usage.cache_n + usage.prompt_n} tokens, {usage.cache_n} from the cache"
        )
