"""An answer cut at `max_tokens` (`finish_reason: length`), and `[loop] wrap_up_on_length`.

With wrap-up on, the turn asks once for a short closing answer: the cut completion's tool
calls, if any, are answered "not run" (their results must come before any later message),
then a `wrap_up` record is written, whose replay is a user message holding `WRAP_UP`, and one
more completion is asked for with the same tools (a change of tools would cost the cache its
prefix). Whatever that completion holds ends the turn.
"""

from __future__ import annotations

from ..clock import Clock
from ..proto import WrapUpRecord
from ..store import OpenSession
from .runtime import write

__all__ = ["CUT_CALL", "WRAP_UP", "ask_to_wrap_up"]

WRAP_UP = (
    "Your last answer was cut off at its length limit. Close it now with a short answer of "
    "a few sentences, and do not call any tools."
)
CUT_CALL = "Not run: the answer that asked for this call was cut off at its length limit."


async def ask_to_wrap_up(session: OpenSession, clock: Clock) -> None:
    """Close the cut completion's calls and write the request for a closing answer."""
    now = clock.now()
    await write(session, *session.healing(now, CUT_CALL), WrapUpRecord(time=now, content=WRAP_UP))
