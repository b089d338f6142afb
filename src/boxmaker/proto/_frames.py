"""Frames on `loop.sock`: `{"kind": K, "final": bool, "body": {...}}`, one JSON line each.

A frame class holds its body's fields; `kind` and `final` follow from the class, and the
converter writes and checks them, so a frame can never claim the wrong kind or finality.
"""

from __future__ import annotations

import enum

from attrs import frozen

from ._chat import Usage
from ._events import TurnEvent
from ._ids import SessionId

__all__ = [
    "ErrorCode",
    "Frame",
    "TurnDoneFrame",
    "TurnDonePartFrame",
    "TurnEventFrame",
    "TurnFrame",
    "WireError",
]


class ErrorCode(enum.Enum):
    BAD_FRAME = "bad_frame"
    INTERNAL = "internal"
    SESSION_FULL = "session_full"
    TURN_LIMIT = "turn_limit"
    SESSION_BUSY = "session_busy"
    NO_SUCH_SESSION = "no_such_session"
    SESSION_EXISTS = "session_exists"
    INFERENCE = "inference"


@frozen
class TurnFrame:
    """To loopd: run one turn. `resume` says whether the session must already exist."""

    session: SessionId
    content: str
    resume: bool
    thinking: bool = True


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
    the content of every part, in order, then that of the `turn_done` (`channel.Channel`
    joins them)."""

    content: str


@frozen
class WireError:
    """The final frame of a turn that failed."""

    code: ErrorCode
    message: str


Frame = TurnFrame | TurnEventFrame | TurnDoneFrame | TurnDonePartFrame | WireError
