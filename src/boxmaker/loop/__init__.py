"""The turn loop and its limits (SPEC section 6)."""

from .errors import InferFailed, SessionFailed, SessionFull, TurnError, TurnLimit
from .length import CUT_CALL, WRAP_UP
from .limits import REPEATED, Repeat, Run, Stop, TurnLimits
from .runtime import OnTurnEvent, Runtime
from .turn import TurnOutcome, run_turn

__all__ = [
    "CUT_CALL",
    "REPEATED",
    "WRAP_UP",
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
