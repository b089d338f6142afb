"""What `loopd` does with a channel's request: a `turn` frame (open or create the session,
run the turn, answer with `turn_done` or an `error` whose code a channel can act on), a
`watch`, a `stop` (SPEC sections 7, 8 and 18).

One `Daemon` is shared by every connection. It holds the one `Client` (whose per-slot gates
serialise requests), the tool port, a mailbox per session in a turn (`mailbox.py`: a turn for
a busy session waits there, steers the running turn, or is refused with `session_busy`), the
sessions it holds open (`open_sessions.py`), the watches (`watchers.py`) and what it knows of
each session's origins (`exactly_once.py`: a message of an origin the session has is answered
`duplicate`, and nothing runs).

A turn runs in its channel's connection task, under its nursery, and is cancelled when its
channel leaves. A detached turn (`detach: true`) runs in the service's nursery instead
(`serve`), under its mailbox's cancel scope as every turn does, so a hard break, a `stop` and
loopd's shutdown reach it; its channel only listens while it is there (`Tether`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import trio

from .. import layout
from ..clock import Clock
from ..config import Config
from ..profiles import Profile
from ..proto import (
    DuplicateFrame,
    ErrorCode,
    Origin,
    QueuedMessage,
    SessionId,
    TurnDoneFrame,
    TurnEndRecord,
    TurnFrame,
    UserRecord,
    WatchingFrame,
    WireError,
)
from ..session import Recorded
from ..store import Store
from ..tools import ToolPort
from .acts import refused_while_acting
from .cache import ServerWatch, SlotCache
from .exactly_once import OriginBook, OriginsUnreadable
from .held import Answer, Figures, Tether, flush_index, run_held
from .infer import Client, Servers
from .loop import OnTurnEvent, Runtime
from .mailbox import Final, Letter, Mailbox, Running
from .open_sessions import OpenSessions, memory_of, session_cache_size, slot_for
from .uploads import Uploads
from .watchers import Watch, Watchers

__all__ = [
    "MAX_DETACHED",
    "Daemon",
    "Deliver",
    "Tether",
    "memory_of",
    "session_cache_size",
    "slot_for",
]

log = logging.getLogger("loopd")

Deliver = Callable[[Answer], Awaitable[None]]
_GUESSES = (ErrorCode.NO_SUCH_SESSION.value, ErrorCode.SESSION_EXISTS.value)
MAX_DETACHED = 64  # detached turns running or waiting at once
_BROKEN = "the turn was stopped by a hard break; the message that broke it runs next"
STOPPED = "the turn was stopped (`stop`, bxctl stop); nothing runs in its place"
INTERRUPTED = (
    "the turn was interrupted: loopd stopped in the middle of it, and closed it as "
    "interrupted when it started again (nothing of it runs again)"
)


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
        self.watch = ServerWatch(client, layout.server_state(config.paths.home))
        self.slot_cache: SlotCache | None = None
        if (save_dir := config.cache.save_dir) is not None:
            self.slot_cache = SlotCache(client, self.watch, save_dir, config.cache.max_bytes)
        self.runtime = Runtime(config, client, port, clock, self.slot_cache or self.watch)
        self.store = store or Store(config.paths.home, clock, memory=memory_of(config))
        self.watchers = Watchers()
        self.uploads = Uploads(config.files, config.paths.home)  # the files `attach` brings
        self.origins = OriginBook(self.store)
        self.sessions = OpenSessions(config, self.store, profiles or {}, self.busy, cache_size)
        self.interrupted: dict[SessionId, Origin | None] = {}  # closed so at this start
        self.quiet = trio.Event()  # stopping, and no turn runs: the watches end
        self._boxes: dict[SessionId, Mailbox] = {}
        self._changed: dict[SessionId, None] = {}  # logs grown since brokerd was told, in order
        self._told = trio.Event()
        self._nursery: trio.Nursery | None = None  # the service's, for detached turns
        self._service = trio.CancelScope()
        self._detached = 0
        self._stopping = False
        self.acting: set[SessionId] = set()  # sessions an owner's act is being made on

    def busy(self, sid: SessionId) -> bool:
        """Whether a turn holds the session (running, or called to run)."""
        box = self._boxes.get(sid)
        return box is not None and not box.idle

    def status(self) -> str:
        """What the daemon holds now, for a status line."""
        running = sum(not box.idle for box in self._boxes.values())
        return (
            f"{running} turns running ({self._detached} detached); {len(self.sessions)} "
            f"sessions open; {len(self.watchers)} watches"
        )

    def close(self) -> None:
        self.sessions.close()

    # --- the service: detached turns, and stopping -------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery detached turns run in, until `stop` and their end (or the grace's)."""
        with self._service:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()

    def detach(self, frame: TurnFrame, tether: Tether) -> bool | WireError:
        """Run `frame`'s turn in the service's nursery; `tether` is its channel's while it is
        there. False when loopd is stopping (or its service does not run): the turn is then
        its channel's, as any other, to run in the grace it has. `MAX_DETACHED` running or
        waiting at once: one more is refused (`session_busy`), since each holds its session
        and its message until served, whoever is still there."""
        if self._stopping or self._nursery is None:
            return False
        if self._detached >= MAX_DETACHED:
            return WireError(
                ErrorCode.SESSION_BUSY,
                f"{MAX_DETACHED} detached turns are running or waiting, as many as loopd keeps; "
                "send this when fewer are, or without detach",
            )
        self._nursery.start_soon(self._detached_turn, frame, tether)
        self._detached += 1
        return True

    async def _detached_turn(self, frame: TurnFrame, tether: Tether) -> None:
        try:
            await self.turn(frame, tether.event, tether.final, tether)
        except Exception as error:  # a bug: it must not take the service (and every one) down
            log.exception("turn %s (detached): internal error", frame.session)
            await tether.final(WireError(ErrorCode.INTERNAL, f"internal error: {error}"))
        finally:
            self._detached -= 1
            self._after_turn()

    def stop(self, grace: float) -> None:
        """loopd is stopping: detached turns get `grace` seconds, then are cancelled; the
        watches end once no turn runs."""
        self._stopping = True
        self._service.deadline = trio.current_time() + grace
        self._after_turn()

    def _after_turn(self) -> None:
        if not self._stopping:
            return
        if self._detached == 0:
            self._service.cancel()
            if all(box.idle for box in self._boxes.values()):
                self.quiet.set()

    # --- requests -----------------------------------------------------------------------

    def stop_turn(self, sid: SessionId) -> bool:
        """Stop the session's running turn (`stop`); False when none runs."""
        box = self._boxes.get(sid)
        if box is None or box.running is None:
            return False
        if not box.running.hard:  # a hard break stopped it already: its message runs next
            log.info("turn %s: stopped (stop)", sid)
            box.running.stop()
        return True

    def add_watch(self, watch: Watch) -> bool:
        """Start `watch`; False past `MAX_WATCHES`. It hears first, for each of its sessions
        whose turn this start closed as interrupted, that turn's `interrupted` error."""
        if not self.watchers.add(watch):
            return False
        watch.outbox.put(WatchingFrame(watch.sessions))
        for sid in watch.sessions:
            if sid in self.interrupted:
                error = WireError(ErrorCode.INTERRUPTED, INTERRUPTED)
                watch.outbox.put_encoded(self.watchers.encoded(sid, self.interrupted[sid], error))
        return True

    async def turn(
        self,
        frame: TurnFrame,
        on_event: OnTurnEvent,
        deliver: Deliver,
        tether: Tether | None = None,
    ) -> None:
        """Run the turn a channel asked for and `deliver` its final frame: `turn_done`, a
        `duplicate` (its origin the session has), or a `WireError` for every failure. For a
        session in a turn, the message waits in its mailbox first (or is refused with
        `session_busy`); a soft break taken into the running turn gets that turn's final
        frame. The turn's log line is written after the delivery, so it never delays the
        answer. Only cancellation (the channel went away, loopd stopping) propagates."""
        sid, origin = frame.session, frame.origin
        entered: Running | Letter | Answer | Recorded
        if origin is None:
            entered = self._enter(frame, on_event)
        else:
            try:
                async with self.origins.held(sid):
                    known = await self.origins.known(sid, origin, self._where(sid))
                    entered = known if known is not None else self._enter(frame, on_event)
            except OriginsUnreadable as error:
                entered = WireError(ErrorCode.INTERNAL, str(error))
        if isinstance(entered, Recorded):
            assert origin is not None
            await deliver(DuplicateFrame(origin, entered.outcome, entered.content))
            return
        if isinstance(entered, Letter):
            called = await self._wait(self._boxes[sid], entered, deliver)
            if called is not None:
                await self._run(called, deliver, tether)
        elif isinstance(entered, Running):
            await self._run(entered, deliver, tether)
        else:
            await deliver(entered)

    def _enter(self, frame: TurnFrame, on_event: OnTurnEvent) -> Running | Letter | WireError:
        """Take the session, or a place in its mailbox, or be refused; synchronously."""
        sid = frame.session
        if sid in self.acting:  # an undo or a mode change: it takes a moment
            return refused_while_acting(sid)
        box = self._boxes.get(sid)
        if box is None:
            box = self._boxes[sid] = Mailbox(sid, self.watchers)
        if box.idle:
            return box.hold(frame, on_event)
        refusal = box.refusal(frame, str(sid))
        if refusal is not None:
            self._forget(sid, box)
            return WireError(ErrorCode.SESSION_BUSY, refusal)
        letter = Letter(frame, on_event)
        on_event(QueuedMessage(ahead=box.post(letter)))
        return letter

    async def _wait(self, box: Mailbox, letter: Letter, deliver: Deliver) -> Running | None:
        """Wait in the session's mailbox until called to run (the turn to run), or answered by
        the turn this soft break joined (None: delivered here)."""
        try:
            await letter.woken.wait()
        except BaseException:  # the channel left
            box.leave(letter)
            self._forget(letter.frame.session, box)
            self._after_turn()
            raise
        if letter.answer is not None:
            await deliver(letter.answer)
            return None
        assert box.running is not None
        return box.running

    async def _run(self, running: Running, deliver: Deliver, tether: Tether | None) -> None:
        frame = running.frame
        sid = frame.session
        box = self._boxes[sid]
        self.interrupted.pop(sid, None)
        started, elapsed = trio.current_time(), 0.0
        figures = Figures()
        outcome = "cancelled"
        answer: Final = WireError(
            ErrorCode.CANCELLED,
            "the turn was cancelled: the channel that started it left, or loopd is stopping",
        )

        def can_ask() -> bool:
            if frame.can_ask and (tether is None or not tether.gone):
                return True
            return frame.detach and self.watchers.can_ask(sid)

        try:
            try:
                with running.scope:  # cancelled by a hard break, or a stop
                    answer = await run_held(
                        self.sessions, self.runtime, self.slot_cache, running, figures, box, can_ask
                    )
                if running.scope.cancelled_caught:
                    answer = WireError(
                        ErrorCode.STOPPED if running.stopped else ErrorCode.BREAK_HARD,
                        STOPPED if running.stopped else _BROKEN,
                    )
            finally:
                box.finish(running, answer)
                self._forget(sid, box)
                try:  # no checkpoint since the turn ended: no check can slip in between
                    self._note_origins(running, figures, answer)
                except Exception:
                    log.exception("turn %s: its origins could not be noted", sid)
                elapsed = trio.current_time() - started
            outcome = "done" if isinstance(answer, TurnDoneFrame) else answer.code.value
            await deliver(answer)
            if figures.session is not None and self._seen(sid, tether, outcome):
                figures.session.mark_shown()
            flush_index(figures.session)
            if figures.session is not None:
                self.changed(sid)
        finally:
            # A channel's resume-or-create guess is expected, not an event of note.
            level = logging.DEBUG if outcome in _GUESSES else logging.INFO
            log.log(level, "turn %s: %s in %.2f s%s", sid, outcome, elapsed, figures)
            self._after_turn()

    def _seen(self, sid: SessionId, tether: Tether | None, outcome: str) -> bool:
        """Whether a person saw the turn end: its channel was there for its answer (a turn
        whose channel left is cancelled), or a watch heard it."""
        if tether is None:
            return outcome != ErrorCode.CANCELLED.value or self.watchers.watched(sid)
        return (tether.looks and not tether.gone) or self.watchers.watched(sid)

    def _note_origins(self, running: Running, figures: Figures, answer: Final) -> None:
        """The origins this turn answered, noted as ended the moment it ends: when its
        message was kept (a turn that left nothing, such as a message refused for its size,
        may be sent again)."""
        session = figures.session
        if not running.origins or session is None or session.index.turns == figures.turns:
            return
        end = session.records[-1]
        if not isinstance(end, TurnEndRecord):
            return
        kept = []  # the origins of this turn's messages in the log (not a healed turn's)
        for record in reversed(session.records[:-1]):
            if isinstance(record, TurnEndRecord):
                break
            if isinstance(record, UserRecord) and record.origin in running.origins:
                kept.append(record.origin)
        content = answer.content if isinstance(answer, TurnDoneFrame) else None
        recorded = Recorded(end.outcome.value, content)
        self.origins.ended(running.frame.session, session.identity, kept, recorded)

    def _where(self, sid: SessionId) -> Callable[[Origin], str | None]:
        """Where the session's mailbox holds a message of an origin, looked up when asked."""

        def where(origin: Origin) -> str | None:
            box = self._boxes.get(sid)
            return box.has(origin) if box is not None else None

        return where

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
