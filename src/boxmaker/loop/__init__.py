"""The turn loop and its limits (SPEC section 6)."""

from .epochs import open_epoch, open_epoch_if_due
from .errors import InferFailed, SessionFailed, SessionFull, TurnError, TurnLimit
from .limits import REPEATED, Repeat, Run, Stop, TurnLimits
from .runtime import OnTurnEvent, Runtime, write
from .turn import TurnOutcome, run_turn
from .wrap_up import CUT_CALL, WRAP_UP

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
    "open_epoch",
    "open_epoch_if_due",
    "run_turn",
    "write",
]
