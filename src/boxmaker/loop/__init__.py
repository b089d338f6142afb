"""The turn loop and its limits (SPEC section 6)."""

from .limits import REPEATED, Repeat, Run, Stop, TurnLimits
from .turn import (
    InferFailed,
    OnTurnEvent,
    Runtime,
    SessionFailed,
    SessionFull,
    TurnError,
    TurnLimit,
    TurnOutcome,
    run_turn,
)

__all__ = [
    "REPEATED",
    "InferFailed",
    "OnTurnEvent",
    "Repeat",
    "Run",
    "Runtime",
    "SessionFailed",
    "SessionFull",
    "Stop",
    "TurnError",
    "TurnLimit",
    "TurnLimits",
    "TurnOutcome",
    "run_turn",
]
