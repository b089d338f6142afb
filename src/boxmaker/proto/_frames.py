"""Frames on `loop.sock` and `broker.sock`: `{"kind": K, "final": bool, "body": {...}}`, one
JSON line each. A frame class holds its body's fields; `kind` and `final` follow from the
class, and the converter writes and checks them: no frame claims the wrong kind or finality.
"""

from __future__ import annotations

import enum

from attrs import field, frozen

from ._attach import AttachedFrame, AttachFrame, FileOffer, FilePieceFrame
from ._chat import Usage
from ._events import TurnEvent
from ._ids import InvalidValue, Origin, SessionId
from ._tools import Answer, Mode
from ._undo import ModeFrame, ModeSetFrame, UndoFrame, UndoneFrame, UndoPreviewFrame

__all__ = [
    "ApprovalDoneFrame",
    "ApprovalFrame",
    "Break",
    "DuplicateFrame",
    "ErrorCode",
    "Frame",
    "ListApprovalsFrame",
    "StopFrame",
    "StoppedFrame",
    "TurnDoneFrame",
    "TurnDonePartFrame",
    "TurnEventFrame",
    "TurnFrame",
    "WaitingApproval",
    "WaitingFrame",
    "WatchEventFrame",
    "WatchFrame",
    "Watched",
    "WatchingFrame",
    "WireError",
]

# A field with this in its metadata is left out of the JSON when it holds its default, so a
# frame that does not use it is the same bytes as before the field existed.
OMIT_DEFAULT = {"omit_if_default": True}


class ErrorCode(enum.Enum):
    BAD_FRAME = "bad_frame"
    INTERNAL = "internal"
    SESSION_FULL = "session_full"
    TURN_LIMIT = "turn_limit"
    SESSION_BUSY = "session_busy"
    NO_SUCH_SESSION = "no_such_session"
    SESSION_EXISTS = "session_exists"
    INFERENCE = "inference"
    BREAK_HARD = "break_hard"
    CANCELLED = "cancelled"
    NO_SUCH_APPROVAL = "no_such_approval"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    TOO_MANY_WATCHES = "too_many_watches"
    CANNOT_UNDO = "cannot_undo"
    FILE_REFUSED = "file_refused"


class Break(enum.Enum):
    """How a message meant for a session in a turn steers that turn."""

    SOFT = "soft"  # taken by the running turn at its next step boundary
    HARD = "hard"  # the running turn is stopped at once; then the message runs


def _check_break(instance: TurnFrame, _attribute: object, value: Break | None) -> None:
    if value is not None and not instance.queue:
        raise InvalidValue("a break waits in the session's mailbox: it needs queue: true", "break_")


def _check_files(instance: TurnFrame, _attribute: object, value: tuple[FileOffer, ...]) -> None:
    if value and instance.break_ is not None:
        raise InvalidValue("a message that steers a running turn carries no files", "files")
    if len(value) > MOST_FILES:
        raise InvalidValue(f"a turn carries at most {MOST_FILES} files", "files")


@frozen
class TurnFrame:
    """To loopd: run one turn. `resume` says whether the session must already exist. For a
    session already in a turn the message waits in its mailbox (`queue`, true unless told
    otherwise: false answers `session_busy` instead), or steers that turn (`break_`).
    `new_epoch` asks for a fresh epoch before this turn. `can_ask` says that the channel
    can put a question to the owner (`approval_needed`): without it, a call that needs the
    owner's approval is denied at once. `detach` says that the turn runs to its end when its
    channel leaves (and its message waits in the mailbox meanwhile); `origin` names where the
    message came from, so a session runs it once (a second frame of the origin gets a
    `duplicate` frame). `untrusted`: its words are not the owner's (a schedule made under
    taint). `mode`: this turn's own, whatever the session's (`/plan`'s read-only turn).
    `files`: files attached to the message, each brought first by an `attach` request."""

    session: SessionId
    content: str
    resume: bool
    thinking: bool = True
    queue: bool = field(default=True, metadata=OMIT_DEFAULT)
    break_: Break | None = field(default=None, metadata=OMIT_DEFAULT, validator=_check_break)
    new_epoch: bool = field(default=False, metadata=OMIT_DEFAULT)
    can_ask: bool = field(default=False, metadata=OMIT_DEFAULT)
    detach: bool = field(default=False, metadata=OMIT_DEFAULT)
    origin: Origin | None = field(default=None, metadata=OMIT_DEFAULT)
    untrusted: bool = field(default=False, metadata=OMIT_DEFAULT)
    mode: Mode | None = field(default=None, metadata=OMIT_DEFAULT)
    files: tuple[FileOffer, ...] = field(default=(), metadata=OMIT_DEFAULT, validator=_check_files)


MOST_FILES = 64  # of a turn frame, whatever [files] max_files says (it is checked after)


@frozen
class TurnEventFrame:
    event: TurnEvent


@frozen
class TurnDoneFrame:
    content: str
    usage: Usage


@frozen
class TurnDonePartFrame:
    """A first part of a `turn_done` whose content would not fit in one frame: the answer is
    every part's content, in order, then the `turn_done`'s (`channel.Channel` joins them)."""

    content: str


@frozen
class WireError:
    """The final frame of a turn that failed."""

    code: ErrorCode
    message: str


@frozen
class ApprovalFrame:
    """To loopd, on a connection of its own: the owner's answer to the call waiting as
    `id`."""

    id: str
    answer: Answer


@frozen
class ApprovalDoneFrame:
    """The answer reached the waiting call."""

    id: str


@frozen
class ListApprovalsFrame:
    """To loopd, on a connection of its own: which calls wait for the owner."""


@frozen
class WaitingApproval:
    id: str
    session: SessionId
    tool: str
    summary: str
    waited_s: float
    detail: str = field(default="", metadata=OMIT_DEFAULT)  # as approval_needed's
    only_once: bool = field(default=False, metadata=OMIT_DEFAULT)  # as approval_needed's


@frozen
class WaitingFrame:
    waiting: tuple[WaitingApproval, ...]


@frozen
class DuplicateFrame:
    """The final frame of a turn frame whose origin the session already has: nothing ran.
    `outcome` is how that origin's turn ended (a `turn_end` outcome), or `running` or
    `waiting` (in the mailbox); `content` its answer, for a turn that ended `done`. An answer
    too long for one frame comes as `turn_done_part` frames first, as `turn_done`'s does."""

    origin: Origin
    outcome: str
    content: str | None = field(default=None, metadata=OMIT_DEFAULT)


@frozen
class StopFrame:
    """To loopd, on a connection of its own: stop `session`'s running turn, as a hard break
    does, with no message to run in its place."""

    session: SessionId


@frozen
class StoppedFrame:
    """The answer to `stop`: whether a turn was running (and was stopped)."""

    session: SessionId
    stopped: bool


MAX_WATCHED = 64  # sessions one watch may name


def _check_watched(_instance: object, _attribute: object, value: tuple[SessionId, ...]) -> None:
    if not 1 <= len(value) <= MAX_WATCHED:
        raise InvalidValue(f"a watch names 1 to {MAX_WATCHED} sessions, not {len(value)}")
    if len(set(value)) != len(value):
        raise InvalidValue("a watch names a session twice")


@frozen
class WatchFrame:
    """To loopd: a connection that stays open and hears every turn of `sessions`, whoever
    started it (`watch_event` frames). `can_ask` says that the watcher can answer approvals:
    a turn whose own channel cannot ask (it left) puts its question to such a watcher."""

    sessions: tuple[SessionId, ...] = field(validator=_check_watched)
    can_ask: bool = field(default=False, metadata=OMIT_DEFAULT)


@frozen
class WatchingFrame:
    """The watch is in place: every turn of these sessions from now on is heard."""

    sessions: tuple[SessionId, ...]


Watched = TurnFrame | TurnEventFrame | TurnDonePartFrame | TurnDoneFrame | WireError


@frozen
class WatchEventFrame:
    """A frame of a turn of a watched session, as the turn's own channel gets it: the turn
    frame that started it (or a soft break taken into it: its message), its events, then its
    final frame. `origin` is that turn frame's (null when it named none)."""

    session: SessionId
    origin: Origin | None
    frame: Watched


Frame = (
    TurnFrame
    | TurnEventFrame
    | TurnDoneFrame
    | TurnDonePartFrame
    | WireError
    | ApprovalFrame
    | ApprovalDoneFrame
    | ListApprovalsFrame
    | WaitingFrame
    | DuplicateFrame
    | StopFrame
    | StoppedFrame
    | WatchFrame
    | WatchingFrame
    | WatchEventFrame
    | ModeFrame
    | ModeSetFrame
    | UndoFrame
    | UndoPreviewFrame
    | UndoneFrame
    | AttachFrame
    | FilePieceFrame
    | AttachedFrame
)
