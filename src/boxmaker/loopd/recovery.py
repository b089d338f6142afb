"""After a crash: the turns loopd was in when it stopped, closed as it starts again.

A turn whose `user` record has no `turn_end` (loopd was killed, or the power went, in the
middle of it) gets, before loopd takes any connection, a `tool_result` for each call it left
without one and a `turn_end` of outcome `interrupted`; it is never run again. Which sessions
need it is told by the last line of each session's current log alone (a log that ends with a
`turn_end` needs nothing, and nearly every log does): only the others are read whole. A
session that cannot be read, or whose log another process holds, is left as it is, with a
warning; its next turn closes the turn as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from attrs import frozen

from .. import layout
from ..proto import InvalidValue, Origin, SessionId, Timestamp, UserRecord
from ..session import SessionError, unended_turn
from ..store import Store, open_checked, session_folders

__all__ = ["Interrupted", "close_interrupted"]

log = logging.getLogger("loopd")

TAIL = 64 * 1024  # bytes read from a log's end to see its last line
_ENDED = b'{"type":"turn_end",'


@frozen
class Interrupted:
    """A turn closed as interrupted at this start, and the origin of its message."""

    session: SessionId
    origin: Origin | None


def close_interrupted(store: Store, now: Callable[[], Timestamp]) -> list[Interrupted]:
    """Close every turn the last loopd left unfinished; what was closed. Blocking."""
    closed = []
    for folder in sorted(session_folders(store.home)):
        try:
            sid = SessionId(folder.name)
        except InvalidValue:
            continue
        if _ends_a_turn(folder):
            continue
        try:
            found = _close(store, sid, now)
        except (SessionError, OSError) as error:
            log.warning("session %s: could not look for an unfinished turn: %s", sid, error)
            continue
        if found is not None:
            log.info("session %s: its turn was interrupted when loopd stopped; closed", sid)
            closed.append(found)
    return closed


def _close(store: Store, sid: SessionId, now: Callable[[], Timestamp]) -> Interrupted | None:
    session = store.resume(sid)
    try:
        if (aside := session.set_aside) is not None:
            log.warning(
                "session %s: its last write was cut short; its %d bytes are kept in %s",
                sid,
                aside.size,
                aside.path,
            )
        unended = unended_turn(session.records, session.state.chained_from)
        if not unended:
            return None
        if not session.hold():
            log.warning("session %s: another process holds its log; its turn stays open", sid)
            return None
        try:
            session.heal(now())
        finally:
            session.release()
        first = unended[0]
        return Interrupted(sid, first.origin if isinstance(first, UserRecord) else None)
    finally:
        session.close()


def _ends_a_turn(folder: Path) -> bool:
    """Whether the session's current log's last line is a `turn_end` (read from its end)."""
    try:
        epochs = layout.epochs_in(os.listdir(folder))
        if not epochs:
            return True  # no log: no session, nothing to close
        fd = open_checked(folder / layout.log_name(epochs[-1]), os.O_RDONLY)
    except (OSError, SessionError):
        return False  # read whole, which says what is wrong
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, TAIL, max(0, size - TAIL))
    finally:
        os.close(fd)
    lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
    return tail.endswith(b"\n") and lines[-1].startswith(_ENDED)
