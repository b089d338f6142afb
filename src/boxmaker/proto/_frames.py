"""Frames on `loop.sock`: `{"kind": K, "final": bool, "body": {...}}`, one JSON line each.

A frame class holds its body's fields; `kind` and `final` follow from the class, and the
converter writes and checks them, so a frame can never claim the wrong kind or finality.
"""

from __future__ import annotations

import enum

from attrs import field, frozen

from ._chat import Usage
from ._events import TurnEvent
from ._ids import SessionId
from ._json import OMIT_IF_DEFAULT

__all__ = ["ErrorCode", "Frame", "TurnDoneFrame", "TurnEventFrame", "TurnFrame", "WireError"]


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
    """To loopd: run one turn. `resume` says whether the session must already exist;
    `new_epoch` asks for a fresh epoch before this turn (left out of the JSON when false, so
    an ordinary turn frame is what it always was)."""

    session: SessionId
    content: str
    resume: bool
    thinking: bool = True
    new_epoch: bool = field(default=False, metadata={OMIT_IF_DEFAULT: True})


@frozen
class TurnEventFrame:
    event: TurnEvent


@frozen
class TurnDoneFrame:
    content: str
    usage: Usage


@frozen
class WireError:
    """The final frame of a turn that failed."""

    code: ErrorCode
    message: str


Frame = TurnFrame | TurnEventFrame | TurnDoneFrame | WireError
