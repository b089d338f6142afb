"""Everything loopd itself says to the model in a turn, in one place, and what of it a fenced
session's answer never shows (a small model copies loopd's words into its answer). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...proto import Baseline, UndoRecord
from ...session import INTERRUPTED
from ...tools import CLOSE, SAID_BY_DISPATCH, problem_texts

__all__ = [
    "CUT_CALL",
    "FORKED",
    "NOT_RUN",
    "REPEATED",
    "TOOLS_OFF",
    "UNDONE",
    "WRAP_UP",
    "loopd_words",
    "undone_note",
]

FORKED = (
    "(This conversation goes on from session {session} after its turn {turn}: the files of "
    "the workspace and the Python interpreter are as they are now, not as they were then.)"
)
UNDONE = "(The owner undid {what}: {paths} {are} now as before it.)"
_UNDONE_SHOWN = 10  # paths named in the note; the rest counted


def undone_note(undos: Sequence[UndoRecord]) -> str:
    """What the next turn tells the model of the undos since its last turn (one line each)."""
    lines = []
    for undo in undos:
        what = (
            f"your changes from turn {undo.from_turn} on"
            if undo.from_turn is not None
            else f"your changes from call {undo.from_call} on"
        )
        names = list(undo.restored[:_UNDONE_SHOWN])
        left = len(undo.restored) - len(names) + undo.more
        paths = ", ".join(names) + (f" and {left} more" if left else "")
        are = "is" if len(names) == 1 and not left else "are"
        lines.append(UNDONE.format(what=what, paths=paths or "nothing", are=are))
    return "\n".join(lines)


REPEATED = (
    "This call was already made with these arguments in this turn, so it was not run again. "
    "Use the result you have, or try something else."
)
WRAP_UP = (
    "Your last answer was cut off at its length limit. Close it now with a short answer of "
    "a few sentences, and do not call any tools."
)
CUT_CALL = "Not run: the answer that asked for this call was cut off at its length limit."
TOOLS_OFF = "No more tools in this turn. Answer my message now, in plain words."
NOT_RUN = "(not run: no more tools in this turn)"
# What a small model makes of loopd's "(not run: ...)" when it copies it without the reason.
BARE_NOT_RUN = ("(not run)", "(not run:)")


def loopd_words(baseline: Baseline) -> tuple[str, ...]:
    """What loopd says to the model in a fenced session: the frame of a tool result, what it
    is told of a block that cannot run, of a call not run or repeated, and the request for a
    plain answer; none of it is ever shown as the answer."""
    fenced = baseline.fenced
    if fenced is None:
        return ()
    frame = [line.strip() for line in (fenced.prefix + "\n" + fenced.suffix).splitlines()]
    offered = [tool.name for tool in baseline.tools]
    return (
        *(line for line in frame if line and line != CLOSE),
        *problem_texts(offered),
        REPEATED,
        INTERRUPTED,
        CUT_CALL,
        WRAP_UP,
        TOOLS_OFF,
        NOT_RUN,
        *BARE_NOT_RUN,
        *SAID_BY_DISPATCH,
    )
