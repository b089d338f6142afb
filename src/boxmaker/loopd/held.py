"""A turn that holds its session: run it (`run_turn`) and say how it ended as the channel's
final frame, `turn_done` or an `error` whose code a channel can act on; and a detached
turn's own channel (`Tether`), which listens while it is there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio
from attrs import define

from ..proto import DuplicateFrame, ErrorCode, TurnDoneFrame, TurnEndRecord, TurnEvent, WireError
from ..session import NoSuchSession, SessionError, SessionExists, StorageError
from ..store import OpenSession
from .cache import SlotCache
from .carried import FileRefused, carry
from .loop import InferFailed, OnTurnEvent, Runtime, SessionFailed, SessionFull, TurnLimit, run_turn
from .mailbox import Final, Mailbox, Running
from .open_sessions import OpenSessions, slot_for

__all__ = ["Answer", "Figures", "Tether", "flush_index", "run_held"]

log = logging.getLogger("loopd")

Answer = Final | DuplicateFrame


class Tether:
    """A detached turn's channel, while it is there: the turn's events and its final frame go
    to it until it leaves, and the turn never waits for it. `looks`: a person is behind it
    (the scheduler's own is not: its turn's end is shown to nobody)."""

    def __init__(
        self, on_event: OnTurnEvent, put_final: Callable[[Answer], None], *, looks: bool = True
    ) -> None:
        self._on_event, self._put_final = on_event, put_final
        self.looks = looks
        self.gone = False
        self.done = trio.Event()  # the final frame is queued, or the channel left

    def event(self, event: TurnEvent) -> None:
        if not self.gone:
            self._on_event(event)

    async def final(self, frame: Answer) -> None:
        if not self.gone:
            self._put_final(frame)
        self.done.set()

    def leave(self) -> None:
        self.gone = True
        self.done.set()


async def run_held(
    sessions: OpenSessions,
    runtime: Runtime,
    slot_cache: SlotCache | None,
    running: Running,
    figures: Figures,
    box: Mailbox,
    can_ask: Callable[[], bool],
) -> TurnDoneFrame | WireError:
    """Run the turn that holds its session and give its final frame; only cancellation
    propagates."""
    frame = running.frame
    sid = frame.session
    try:
        carried = None
        if frame.files and not frame.resume:  # before the session is made: it may be refused
            carried = await carry(frame.files, runtime, slot_for(sid, runtime.config))
        session = await sessions.get(sid, frame.resume)
        if frame.files and frame.resume:
            carried = await carry(frame.files, runtime, session.slot)
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
                runtime,
                frame.content,
                running.emit,
                thinking=frame.thinking,
                steer=box,
                new_epoch=frame.new_epoch,
                can_ask=can_ask,
                origin=frame.origin,
                untrusted=frame.untrusted,
                mode=frame.mode,
                carried=carried,
            )
        finally:
            session.release()
        if slot_cache is not None:  # saved in the background, the slot idle
            prompt = result.usage.cache_n + result.usage.prompt_n
            messages = session.request_messages()
            slot_cache.after_turn(str(sid), session.slot, messages, prompt)
        log.debug("turn %s: answer: %s", sid, result.content)
        return TurnDoneFrame(content=result.content, usage=result.usage)
    except FileRefused as error:
        return WireError(ErrorCode.FILE_REFUSED, str(error))
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
        sessions.drop(sid)
        log.error("turn %s: %s", sid, error)
        return WireError(ErrorCode.INTERNAL, str(error))
    except Exception as error:  # a bug: answer the channel, keep serving the others
        sessions.drop(sid)
        log.exception("turn %s: internal error", sid)
        return WireError(ErrorCode.INTERNAL, f"internal error: {type(error).__name__}: {error}")


def flush_index(session: OpenSession | None) -> None:
    """The turn's `index.json`, once its answer went out; a failure is a warning (the log,
    which is durable, outranks it; the next turn's end writes it again)."""
    if session is None:
        return
    try:
        session.flush_index()
    except StorageError as error:
        log.warning("session %s: %s", session.id, error)


@define
class Figures:
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
