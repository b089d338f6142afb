"""The owner's acts on a session between its turns (SPEC section 21): setting its mode, and an
undo of its changes to the roots. Each is a request on `loop.sock` answered by one final
frame: `mode` by `mode_set`, `undo` by `undo_preview` or `undone` (brokerd, which owns the
roots, previews and restores; loopd writes the `mode` and `undo` records, so the log stays
loopd's alone). While a turn holds the session neither is made: the act is refused with
`session_busy`, and a turn frame that comes while one is being made is refused the same way.
"""

from __future__ import annotations

import logging
from typing import Protocol

import attrs

from ..config import Config
from ..proto import (
    ErrorCode,
    Frame,
    ModeFrame,
    ModeRecord,
    ModeSetFrame,
    SessionId,
    UndoFrame,
    UndoneFrame,
    UndoRecord,
    WireError,
)
from ..serving import BrokerDown, BrokerPort
from ..session import NoSuchSession, SessionError, mode_of
from ..store import OpenSession
from .loop import Runtime
from .open_sessions import OpenSessions


class Daemon(Protocol):
    """What an act needs of loopd's `service.Daemon`."""

    config: Config
    runtime: Runtime
    sessions: OpenSessions
    acting: set[SessionId]

    def busy(self, sid: SessionId) -> bool: ...

    def changed(self, sid: SessionId) -> None: ...


__all__ = ["ACTING", "owner_act", "refused_while_acting"]

log = logging.getLogger("loopd")

ACTING = "an undo or a mode change of session {sid} is being made; send this again after it"


async def owner_act(daemon: Daemon, frame: ModeFrame | UndoFrame) -> Frame:
    """Set the mode, or preview or make the undo, `frame` asks for; never raises for what the
    channel, the disk or brokerd did."""
    sid = frame.session
    what = "the mode" if isinstance(frame, ModeFrame) else "an undo"
    if daemon.busy(sid) or sid in daemon.acting:
        return WireError(
            ErrorCode.SESSION_BUSY,
            f"a turn of {sid} is running: {what} waits for its end (or stop it: bxctl stop)",
        )
    daemon.acting.add(sid)
    try:
        session = await daemon.sessions.get(sid, resume=True)
        if not session.hold():
            return WireError(
                ErrorCode.SESSION_BUSY, f"another process holds session {sid}'s log; send again"
            )
        try:
            if isinstance(frame, ModeFrame):
                return _set_mode(daemon, session, frame)
            return await _undo(daemon, session, frame)
        finally:
            session.release()
    except NoSuchSession:
        return WireError(ErrorCode.NO_SUCH_SESSION, f"no session {sid}")
    except SessionError as error:
        daemon.sessions.drop(sid)
        return WireError(ErrorCode.INTERNAL, f"{what} of {sid} was not kept: {error}")
    finally:
        daemon.acting.discard(sid)


def _set_mode(daemon: Daemon, session: OpenSession, frame: ModeFrame) -> Frame:
    was = mode_of(session.records)
    if frame.mode is None:  # only asked
        return ModeSetFrame(frame.session, was, was)
    if frame.mode is not was:
        session.append(ModeRecord(daemon.runtime.clock.now(), frame.mode, frame.by))
        daemon.changed(frame.session)
        log.info("session %s: mode %s (was %s)", frame.session, frame.mode.value, was.value)
    return ModeSetFrame(frame.session, frame.mode, was)


async def _undo(daemon: Daemon, session: OpenSession, frame: UndoFrame) -> Frame:
    port = daemon.runtime.port
    if not isinstance(port, BrokerPort):
        return WireError(ErrorCode.CANNOT_UNDO, "no brokerd holds the roots here: nothing to undo")
    if frame.turn is None and frame.call is None:  # the last turn's
        if not session.index.turns:
            return WireError(ErrorCode.CANNOT_UNDO, f"session {frame.session} has no turn yet")
        frame = attrs.evolve(frame, turn=session.index.turns)
    asked = attrs.evolve(frame, identity=session.identity)
    try:
        answer = await port.undo(asked, daemon.config.tools.call_timeout_s)
    except BrokerDown as error:
        return WireError(ErrorCode.CANNOT_UNDO, f"brokerd could not be asked: {error}")
    if isinstance(answer, WireError):
        return WireError(ErrorCode.CANNOT_UNDO, answer.message)
    if isinstance(answer, UndoneFrame):
        record = UndoRecord(
            daemon.runtime.clock.now(),
            answer.restored,
            frame.turn,
            frame.call,
            answer.more,
            frame.force,
            frame.by,
        )
        session.append(record)
        daemon.changed(frame.session)
        log.info("session %s: undone from %s", frame.session, _from(frame))
    return answer


def _from(frame: UndoFrame) -> str:
    return f"turn {frame.turn}" if frame.turn is not None else f"call {frame.call}"


def refused_while_acting(sid: SessionId) -> WireError:
    """A turn frame for a session an act is being made on."""
    return WireError(ErrorCode.SESSION_BUSY, ACTING.format(sid=sid))
