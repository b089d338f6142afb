"""`bxctl replay`: loopd's replay, run in a process of its own (SPEC section 20).

Replay runs the loop's own code, which is loopd's house, not bxctl's: bxctl hands its
arguments to `loopd replay` (the same Python, `-m boxmaker.loopd.main`), which says what it
takes (`bxctl replay --help`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

__all__ = ["COMMAND", "add_command", "run_replay"]

COMMAND = "replay"


def add_command(commands: Any) -> None:
    """`bxctl replay ...`: every argument is `loopd replay`'s."""
    commands.add_parser(
        COMMAND,
        help="run a session's turns again from its log and compare (loopd replay)",
        add_help=False,
        prefix_chars="\0",  # every argument, --help too, goes to loopd replay
    ).add_argument("given", nargs=argparse.REMAINDER)


def run_replay(args: argparse.Namespace) -> NoReturn:
    """Become `loopd replay` with the arguments given."""
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "boxmaker.loopd.main", COMMAND, *args.given])
