"""What the gateway keeps between runs, in `<home>/gateway/state.json` (0600, replaced whole
and fsynced on each change): where the network's history was read to (`position`), each room's
session and the files sent there that wait for a message, the owner's messages loopd has
taken but the gateway has not answered yet (`pending`, each with its files), and the
questions it put to the owner that wait (`questions`: an owner's reply read before the
gateway could post them again is known for what it is). docs/storage.md, "The gateway's
files".

Exactly once rests on the order of writes: a message is entered in `pending` before it goes to
loopd, and the position passes it only after loopd has it (or the gateway has dealt with it
otherwise); its entry leaves `pending` only once its answer is posted. So after a crash at any
point each message is either seen again (and sent again: loopd answers `duplicate` if it has
it) or in `pending` (and asked about again), and an answer is posted again only under the
key it had (`answers.key_of`), which the homeserver makes once. A file that waits enters its
room's `waiting` in the same write that marks its event handled, and leaves it in the write
that enters the message that takes it in `pending`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from attrs import define, field, frozen

from .. import layout
from ..proto import DecodeError, dumps, loads
from ..store import FileSystem
from .sent_files import SentFile

__all__ = [
    "HANDLED",
    "MAX_PENDING",
    "MAX_QUESTIONS",
    "MAX_ROOMS",
    "Asked",
    "Pending",
    "Room",
    "State",
    "StateDamaged",
]

MAX_ROOMS = 64  # a watch holds at most 64 sessions
MAX_PENDING = 256
HANDLED = 512  # ids of commands dealt with, kept so that one seen again does nothing twice
MAX_QUESTIONS = 256


class StateDamaged(Exception):
    """The state file is not one the gateway wrote; the message names it."""


@frozen
class Room:
    """A room's session (`sessions[-1]`; `!new` adds one), what it was told once, and the
    files the owner sent there that wait for the next message (`sent_files`)."""

    sessions: tuple[str, ...]
    created: bool = False  # the current session exists in loopd
    told_stranger: bool = False
    waiting: tuple[SentFile, ...] = ()

    @property
    def session(self) -> str:
        return self.sessions[-1]


@frozen
class Pending:
    """An owner's message loopd has (or may have), not answered yet. A message a running turn
    took as a soft break is answered by that turn's answer: `joined` is its key (`answers`),
    `joined_reply` the message that answer replies to (None for a turn no message of the room
    started: a schedule's, a terminal's). `files`: the files the message carries (it then
    waits for a running turn to end rather than steer it: loopd takes no file in a break)."""

    room: str
    session: str
    text: str
    joined: str | None = None
    joined_reply: str | None = None
    files: tuple[SentFile, ...] = ()


@frozen
class Asked:
    """A question for the owner the gateway posted (by its message's id): the call's approval
    id, and the room it was asked in."""

    approval: str
    room: str


@define
class Saved:
    position: str | None = None
    rooms: dict[str, Room] = field(factory=dict)
    pending: dict[str, Pending] = field(factory=dict)
    handled: list[str] = field(factory=list)
    questions: dict[str, Asked] = field(factory=dict)


def session_for(room: str, number: int = 1) -> str:
    """A room's session id: valid under SPEC's rules whatever the room's id holds."""
    base = "mx-" + hashlib.sha256(room.encode()).hexdigest()[:16]
    return base if number == 1 else f"{base}-{number}"


class State:
    """The state, and its file: each change is written before it is relied on."""

    def __init__(self, home: Path, fs: FileSystem | None = None) -> None:
        self.folder = layout.gateway_folder(home)
        self.path = self.folder / "state.json"
        self._fs = fs or FileSystem()
        self.saved = Saved()

    def load(self) -> None:
        """Read the file (none: a new gateway).

        Raises:
            StateDamaged: it is not the gateway's.
            OSError, Exposed: it cannot be read, or is not this user's alone.
        """
        self._fs.makedirs(self.folder)
        data = self._fs.read_if_there(self.path)
        if data is not None:
            try:
                self.saved = loads(Saved, data)
            except DecodeError as error:
                raise StateDamaged(f"{self.path}: {error}; move it aside to start anew") from error

    def save(self) -> None:
        self._fs.replace_file(self.path, dumps(self.saved) + b"\n")

    @property
    def position(self) -> str | None:
        return self.saved.position

    @property
    def rooms(self) -> dict[str, Room]:
        return self.saved.rooms

    @property
    def pending(self) -> dict[str, Pending]:
        return self.saved.pending

    @property
    def questions(self) -> dict[str, Asked]:
        return self.saved.questions

    def sessions(self) -> tuple[str, ...]:
        """The sessions the gateway watches: each room's current one."""
        return tuple(sorted({room.session for room in self.saved.rooms.values()}))

    def room_of(self, session: str) -> str | None:
        for name, room in self.saved.rooms.items():
            if session in room.sessions:
                return name
        return None

    def handled(self, event_id: str) -> bool:
        return event_id in self.saved.handled

    def mark_handled(self, event_id: str) -> None:
        self.saved.handled = [*self.saved.handled[-(HANDLED - 1) :], event_id]
