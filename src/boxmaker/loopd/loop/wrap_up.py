"""A turn asking for a closing answer without tools: after an answer cut at `max_tokens`
(`finish_reason: length`, with `[loop] wrap_up_on_length`), or when a fenced turn's tool use
is ended (`WrapUpReason`).

The turn asks once: the last completion's tool calls left without a result are answered "not
run" (their results must come before any later message), then a `wrap_up` record is written,
whose replay is a user message holding its text, and one more completion is asked for with
the same tools (a change of tools would cost the cache its prefix). Whatever that completion
holds ends the turn; in a fenced session its tool blocks are not run, and not shown.

A fenced turn's tool use ends at a second block that cannot be read, at a block repeated with
the same arguments, or past `[loop] tool_iterations` (`limits.py` decides): a small model
that only writes blocks, or the same one again, would otherwise spiral until `max_tokens` or
`turn_limit`; asked plainly, it answers (docs/decisions.md).
"""

from __future__ import annotations

from ...clock import Clock
from ...proto import WrapUpReason, WrapUpRecord
from ...store import OpenSession
from .runtime import write
from .words import CUT_CALL, NOT_RUN, TOOLS_OFF, WRAP_UP

__all__ = ["ask_to_wrap_up"]


async def ask_to_wrap_up(
    session: OpenSession, clock: Clock, reason: WrapUpReason | None = None
) -> None:
    """Close the last completion's calls and write the request for a closing answer: after a
    cut at `max_tokens` (no `reason`), or once a fenced turn's tool use ended (`reason`)."""
    now = clock.now()
    asked, not_run = (WRAP_UP, CUT_CALL) if reason is None else (TOOLS_OFF, NOT_RUN)
    closing = WrapUpRecord(time=now, content=asked, reason=reason)
    await write(session, *session.healing(now, not_run), closing)
