"""The turn loop and its limits (SPEC section 6)."""

from .approvals import Approvals
from .calls import NOBODY, SAID_NO, TIMED_OUT, CanAsk, never
from .epochs import open_epoch, open_epoch_if_due
from .errors import InferFailed, SessionFailed, SessionFull, TurnError, TurnLimit
from .limits import Repeat, Run, Stop, TurnLimits, WrapUp
from .runtime import Carried, OnTurnEvent, Runtime, write
from .steer import Message
from .turn import TurnOutcome, run_turn
from .words import CUT_CALL, NOT_RUN, REPEATED, TOOLS_OFF, WRAP_UP, loopd_words

__all__ = [
    "CUT_CALL",
    "NOBODY",
    "NOT_RUN",
    "REPEATED",
    "SAID_NO",
    "TIMED_OUT",
    "TOOLS_OFF",
    "WRAP_UP",
    "Approvals",
    "CanAsk",
    "Carried",
    "InferFailed",
    "Message",
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
    "WrapUp",
    "loopd_words",
    "never",
    "open_epoch",
    "open_epoch_if_due",
    "run_turn",
    "write",
]
