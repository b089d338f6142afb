"""Replay (SPEC section 20): a recorded session's turns run again through the real loop with
every answer from its log, and compared with it line by line."""

from .compare import Difference
from .driver import replay, select_runs
from .errors import Gap, MissingInput, ReplayError
from .report import Report
from .scratch import read_tape
from .tape import Place, Run, Tape

__all__ = [
    "Difference",
    "Gap",
    "MissingInput",
    "Place",
    "ReplayError",
    "Report",
    "Run",
    "Tape",
    "read_tape",
    "replay",
    "select_runs",
]
