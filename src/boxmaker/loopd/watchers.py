"""The watches on `loop.sock`: connections that hear every turn of the sessions they name,
whoever started the turn (a second terminal, the gateway's room, a schedule's session).

A turn's frames go to each watcher of its session as `watch_event {session, origin, frame}`:
the turn frame that started it (and that of each soft break it takes), its events, then its
final frame. Each is encoded once for all the session's watchers, inside an envelope made
once per turn, and queued on each watcher's `Outbox`, which drops a watcher that lets 4 MiB
wait or takes nothing for `[channel] write_timeout_s`: a watcher never slows or cancels a
turn. At most `MAX_WATCHES` watches at once (of which `MAX_SILENT` that cannot ask), each of
at most 64 sessions (`WatchFrame`); a frame is never the turn's to fail for a watcher.
"""

from __future__ import annotations

import logging

import attrs

from ..channel import MAX_FRAME, split_frame
from ..proto import (
    ErrorCode,
    Origin,
    SessionId,
    TurnEvent,
    TurnEventFrame,
    TurnFrame,
    Watched,
    WireError,
    dumps,
    frame_is_final,
    json_str,
)
from .outbox import Outbox

__all__ = ["CUT", "MAX_SILENT", "MAX_WATCHES", "Watch", "Watchers"]

log = logging.getLogger("loopd")

MAX_WATCHES = 16
MAX_SILENT = 12  # of them that cannot answer approvals
CUT = " … [cut to fit a watch_event frame; the session's log holds it whole]"
_CLOSE = b"}}\n"


class Watch:
    """One watch: the sessions it names, whether it can answer approvals, and its outbox."""

    def __init__(self, sessions: tuple[SessionId, ...], can_ask: bool, outbox: Outbox) -> None:
        self.sessions = sessions
        self.can_ask = can_ask
        self.outbox = outbox


class Watchers:
    """Every watch, by session."""

    def __init__(self) -> None:
        self._by_session: dict[SessionId, list[Watch]] = {}
        self._watches: list[Watch] = []
        self._envelope: dict[SessionId, tuple[Origin | None, bytes]] = {}

    def __len__(self) -> int:
        return len(self._watches)

    def add(self, watch: Watch) -> bool:
        """Start hearing `watch`'s sessions; False when `MAX_WATCHES` already listen, or, for
        a watch that cannot ask, when `MAX_SILENT` such do (the rest are kept for watchers
        that can answer a detached turn's questions: the gateway, a terminal)."""
        silent = sum(not w.can_ask for w in self._watches)
        if len(self._watches) >= MAX_WATCHES or (not watch.can_ask and silent >= MAX_SILENT):
            return False
        self._watches.append(watch)
        for sid in watch.sessions:
            self._by_session.setdefault(sid, []).append(watch)
        return True

    def remove(self, watch: Watch) -> None:
        if watch not in self._watches:
            return
        self._watches.remove(watch)
        for sid in watch.sessions:
            left = [w for w in self._by_session.get(sid, ()) if w is not watch]
            if left:
                self._by_session[sid] = left
            else:
                self._by_session.pop(sid, None)
                self._envelope.pop(sid, None)

    def watched(self, sid: SessionId) -> bool:
        return sid in self._by_session

    def can_ask(self, sid: SessionId) -> bool:
        """Whether a watcher of `sid` can answer approvals now."""
        return any(w.can_ask and not w.outbox.dropped for w in self._by_session.get(sid, ()))

    def event(self, sid: SessionId, origin: Origin | None, event: TurnEvent) -> None:
        if sid in self._by_session:  # the common case, a session nobody watches, costs this
            self.publish(sid, origin, TurnEventFrame(event))

    def publish(self, sid: SessionId, origin: Origin | None, frame: Watched) -> None:
        """Give `frame` of a turn of `sid` (started by `origin`) to each of its watchers."""
        watches = self._by_session.get(sid)
        if not watches:
            return
        data = self.encoded(sid, origin, frame)
        for watch in list(watches):
            try:
                watch.outbox.put_encoded(data)
            except Exception:  # never the turn's to fail: the watcher is dropped instead
                log.exception("a watch of %s could not be given a frame; dropping it", sid)
                self.remove(watch)

    def encoded(self, sid: SessionId, origin: Origin | None, frame: Watched) -> bytes:
        """`frame` as the `watch_event` frames that carry it (a long text over several)."""
        head = self._head(sid, origin)
        room = MAX_FRAME - len(head) - len(_CLOSE)
        if isinstance(frame, TurnFrame):
            pieces: list[Watched] = [_fitted(frame, room)]
        else:
            pieces = split_frame(frame, room)  # type: ignore[assignment]
        lines = []
        for piece in pieces:
            inner = dumps(piece)
            if len(inner) > room:  # an event no split fits (a tool call's arguments): as on a
                if not frame_is_final(piece):  # turn's own channel, left out; a final, said so
                    continue
                inner = dumps(WireError(ErrorCode.INTERNAL, "a final frame too long to watch"))
            lines.append(head + inner + _CLOSE)
        return b"".join(lines)

    def _head(self, sid: SessionId, origin: Origin | None) -> bytes:
        """The envelope's bytes before the frame, made once per session and origin."""
        known = self._envelope.get(sid)
        if known is not None and known[0] == origin:
            return known[1]
        said = b"null" if origin is None else dumps(origin)
        head = b'{"kind":"watch_event","final":false,"body":{"session":%s,"origin":%s,"frame":' % (
            json_str(sid.value).encode(),
            said,
        )
        self._envelope[sid] = (origin, head)
        return head


def _fitted(frame: TurnFrame, room: int) -> TurnFrame:
    """A turn frame as a watcher is shown it: whole when it fits the envelope (nearly always:
    a frame that came in was at most 1 MiB), else its content cut, saying so."""
    if len(dumps(frame)) <= room:
        return frame
    content = frame.content
    while len(dumps(attrs.evolve(frame, content=content + CUT))) > room:
        content = content[: len(content) - max(1, len(content) // 100)]
    return attrs.evolve(frame, content=content + CUT)
