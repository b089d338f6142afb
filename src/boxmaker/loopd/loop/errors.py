"""How a turn ends without an answer: one tree, each with the `turn_end` outcome it writes.

    TurnError
     ├── SessionFull        the conversation no longer fits the server's context
     ├── TurnLimit          a runaway was stopped
     ├── InferFailed(error) any other inference failure, after the retries
     └── SessionFailed(error) the store could not write

What a turn appended before it ended stays (docs/protocol.md, "Errors").
"""

from __future__ import annotations

from typing import ClassVar

from ...proto import Outcome
from ...session import SessionError
from ..infer import InferError

__all__ = ["InferFailed", "SessionFailed", "SessionFull", "TurnError", "TurnLimit"]


class TurnError(Exception):
    """A turn that ended without an answer; what it appended stays. `outcome` is what its
    `turn_end` record says."""

    outcome: ClassVar[Outcome] = Outcome.INTERNAL


class SessionFull(TurnError):
    """The prompt no longer fits the server's context; `error` is the server's refusal, when
    there was one (its body names the sizes)."""

    outcome = Outcome.SESSION_FULL

    def __init__(self, message: str, error: InferError | None = None) -> None:
        self.error = error
        super().__init__(message)


class TurnLimit(TurnError):
    """A runaway was stopped: too many tool iterations, or repeated identical calls."""

    outcome = Outcome.TURN_LIMIT


class InferFailed(TurnError):
    outcome = Outcome.INFERENCE

    def __init__(self, error: InferError) -> None:
        self.error = error
        super().__init__(str(error))


class SessionFailed(TurnError):
    def __init__(self, error: SessionError) -> None:
        self.error = error
        super().__init__(str(error))
