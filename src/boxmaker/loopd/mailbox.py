"""A session's mailbox: the turn that holds the session, and the messages waiting
for it, in the order they will be served.

One `Mailbox` per session that has a turn running or messages waiting. A `turn` frame for a
session that is free takes it at once; otherwise it waits here as a `Letter`, at most
`MAILBOX_SIZE` of them, each on its own channel's connection:

- plain messages and soft breaks wait in arrival order (FIFO); a hard break goes in front of
  every message that is not a hard break (behind earlier hard breaks), and stops the turn
  holding the session at once (its cancel scope) unless a hard break already did;
- when a turn ends, the letter at the head is called to run: it holds the session from that
  moment, before its task wakes, so no frame can slip in between;
- at each step boundary the running turn takes the soft breaks at the head (`take`): their
  channels then follow that turn, hearing its events and its final frame;
- a letter whose channel leaves is dropped; if it had been called to run, the session passes
  on to the next.

A detached message (`detach: true`) waits in a task of the service, not of its channel, so
it stays when its channel leaves. Every turn is also heard by the session's watchers
(`watchers.py`): the turn frame that starts it, each soft break's frame it takes, its events
and its final frame. A `stop` is a hard break with no message behind it.

Everything here is synchronous (no checkpoint between a decision and its effect), so the
order of the mailbox is the order of the log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import trio

from ..proto import (
    Break,
    ErrorCode,
    Origin,
    SessionId,
    TurnDoneFrame,
    TurnEvent,
    TurnFrame,
    WireError,
)
from .loop import Message, OnTurnEvent
from .watchers import Watchers

__all__ = ["MAILBOX_SIZE", "Final", "Letter", "Mailbox", "Running"]

MAILBOX_SIZE = 16  # messages waiting per session; one more is refused with session_busy

Final = TurnDoneFrame | WireError


class Letter:
    """A message waiting in a mailbox, and how its channel hears of it."""

    def __init__(self, frame: TurnFrame, on_event: OnTurnEvent) -> None:
        self.frame = frame
        self.on_event = on_event
        self.woken = trio.Event()  # called to run, or answered
        self.answer: Final | None = None  # the final frame of the turn it joined, once ended
        self.joined: Running | None = None  # the turn that took it (a soft break)

    @property
    def hard(self) -> bool:
        return self.frame.break_ is Break.HARD


class Running:
    """The turn that holds a session: its frame, its channels, and the scope a hard break (or
    a `stop`) cancels."""

    def __init__(
        self,
        sid: SessionId,
        frame: TurnFrame,
        on_event: OnTurnEvent,
        watchers: Watchers,
        letter: Letter | None = None,
    ) -> None:
        self.sid = sid
        self.frame = frame
        self.letter = letter  # the letter it runs for, if it waited
        self.scope = trio.CancelScope()
        self.hard = False  # a hard break stopped it
        self.stopped = False  # that hard break was a `stop`
        self.listeners: list[OnTurnEvent] = [on_event]
        self.joined: list[Letter] = []
        self._watchers = watchers
        watchers.publish(sid, frame.origin, frame)

    @property
    def origins(self) -> list[Origin]:
        """The origins of the messages this turn answers: its own, and its soft breaks'."""
        frames = [self.frame, *(letter.frame for letter in self.joined)]
        return [frame.origin for frame in frames if frame.origin is not None]

    def emit(self, event: TurnEvent) -> None:
        """Pass an event of the turn to its channel, every channel that joined it, and the
        session's watchers. A joined channel that cannot take it (its connection's queue
        refuses) hears no more events; the turn is not its to fail."""
        own, *joined = self.listeners
        own(event)
        for listener in joined:
            try:
                listener(event)
            except Exception:
                self.listeners.remove(listener)
        self._watchers.event(self.sid, self.frame.origin, event)

    def break_hard(self) -> None:
        self.hard = True
        self.scope.cancel()

    def stop(self) -> None:
        self.stopped = True
        self.break_hard()


class Mailbox:
    """One session's running turn and waiting letters. It is the `Steer` of its turns."""

    def __init__(self, sid: SessionId, watchers: Watchers) -> None:
        self.sid = sid
        self.watchers = watchers
        self.running: Running | None = None
        self.letters: deque[Letter] = deque()

    @property
    def idle(self) -> bool:
        return self.running is None

    def hold(self, frame: TurnFrame, on_event: OnTurnEvent) -> Running:
        """A turn takes the free session at once."""
        assert self.running is None
        self.running = Running(self.sid, frame, on_event, self.watchers)
        return self.running

    def has(self, origin: Origin) -> str | None:
        """Where a message of `origin` is: `running` (the running turn answers it) or
        `waiting` (in line), else None."""
        if self.running is not None and origin in self.running.origins:
            return "running"
        if any(letter.frame.origin == origin for letter in self.letters):
            return "waiting"
        return None

    def refusal(self, frame: TurnFrame, sid: str) -> str | None:
        """Why `frame` cannot wait for the busy session, if it cannot."""
        if not frame.queue:
            return f"session {sid} is already in a turn; send this one when that turn ends"
        if len(self.letters) >= MAILBOX_SIZE:
            return (
                f"session {sid} is in a turn and {len(self.letters)} messages are waiting for "
                "it, as many as its mailbox holds; send this one when fewer are"
            )
        return None

    def post(self, letter: Letter) -> int:
        """Put a letter in line; how many are ahead of it (the running turn counted). A hard
        break stops the running turn."""
        assert self.running is not None
        if letter.hard:
            place = sum(1 for waiting in self.letters if waiting.hard)
            self.letters.insert(place, letter)
            if not self.running.hard:
                self.running.break_hard()
        else:
            self.letters.append(letter)
        return 1 + self.letters.index(letter)

    def leave(self, letter: Letter) -> None:
        """The letter's channel left: drop it, from the line or from the turn it joined; if
        it had been called to run, pass the session on."""
        if letter in self.letters:
            self.letters.remove(letter)
        elif letter.joined is not None:
            turn = letter.joined
            if letter.on_event in turn.listeners:
                turn.listeners.remove(letter.on_event)
        elif self.running is not None and self.running.letter is letter:
            self.finish(self.running, WireError(ErrorCode.CANCELLED, "its channel left"))

    def take(self) -> Sequence[Message]:
        """The soft breaks at the head of the line, taken into the running turn (`Steer`). One
        that asks to create the session (`resume: false`) is not: it runs on its own, to be
        told the session exists."""
        running, taken = self.running, []
        assert running is not None
        while self.letters and _soft(self.letters[0].frame):
            letter = self.letters.popleft()
            letter.joined = running
            running.listeners.append(letter.on_event)
            running.joined.append(letter)
            self.watchers.publish(self.sid, letter.frame.origin, letter.frame)
            taken.append((letter.frame.content, letter.frame.origin, letter.frame.untrusted))
        return taken

    @property
    def hard(self) -> bool:
        """Whether a hard break stopped the running turn (`Steer`)."""
        return self.running is not None and self.running.hard

    @property
    def stopped(self) -> bool:
        """Whether that hard break was a `stop` (`Steer`)."""
        return self.running is not None and self.running.stopped

    def finish(self, running: Running, answer: Final) -> None:
        """The running turn ended with `answer`: the channels that joined it get it too, and
        the letter at the head is called to run."""
        assert running is self.running
        self.watchers.publish(self.sid, running.frame.origin, answer)
        for letter in running.joined:
            letter.answer = answer
            letter.woken.set()
        if self.letters:
            letter = self.letters.popleft()
            self.running = Running(self.sid, letter.frame, letter.on_event, self.watchers, letter)
            letter.woken.set()
        else:
            self.running = None


def _soft(frame: TurnFrame) -> bool:
    return frame.break_ is Break.SOFT and frame.resume
