"""What stops a replay before it can compare (SPEC section 20)."""

from __future__ import annotations

from .tape import Place

__all__ = ["Gap", "MissingInput", "ReplayError"]


class ReplayError(Exception):
    def __init__(self, place: Place, what: str) -> None:
        self.place = place
        self.what = what
        super().__init__(f"epoch {place[0]} line {place[1] + 1}: {what}")


class Gap(ReplayError):
    """The loop asked for something the log does not hold there: the replay went another
    way than the recording (a difference, at `place`)."""


class MissingInput(ReplayError):
    """The log was written by a loopd from before replay and lacks an input the turn needs
    (`what` names it): replay says so rather than guess."""
