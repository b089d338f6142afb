"""Auto-recall (SPEC section 17, `[memory] auto_recall`): before a turn's first request, what
memory holds of the user's message, when anything passes the threshold.

loopd asks brokerd (`recall` on broker.sock: brokerd holds memory, and its policy's grant of
`recall` applies) with the message's words, the turn's number and the first turn the
conversation still holds (those need not be found again). What comes back is appended after
the user message as a `recall` record, which replay gives as a `recall` call and its result:
the model reads memory as evidence a tool gave, and every later request still extends this
one. Only a session that holds the `recall` tool gets it, so the call is one the model could
have made itself. It never holds a turn up for long: past `AUTO_RECALL_S`, or when brokerd
cannot answer, the turn goes on without it.
"""

from __future__ import annotations

import logging

import trio

from ...memory import query_words
from ...proto import RecallFrame, RecallRecord, ResultResponse, ToolCallStarted, ToolResult
from ...store import OpenSession
from ...tools import RECALL, cap_result
from .runtime import OnTurnEvent, Runtime, write

__all__ = ["AUTO_RECALL_S", "auto_recall"]

log = logging.getLogger("loopd")

AUTO_RECALL_S = 2.0  # the most a turn's first request waits for it


async def auto_recall(
    session: OpenSession, runtime: Runtime, on_event: OnTurnEvent, content: str
) -> bool:
    """Append what memory holds of `content` (the turn's user message, just written) as a
    `recall` record, when auto-recall is on, the session has `recall`, and anything passes
    the threshold; written with the user message's durability (made durable with it).
    Whether it appended one."""
    if not runtime.config.memory.auto_recall:
        return False
    if all(tool.name != RECALL.name for tool in session.baseline.tools):
        return False
    words = query_words(content)
    if not words:
        return False
    query = " ".join(words)
    frame = RecallFrame(session.id, query, session.index.turns + 1, session.first_turn)
    response = None
    with trio.move_on_after(AUTO_RECALL_S):
        response = await runtime.port.auto_recall(frame)
    if not isinstance(response, ResultResponse) or not response.content:
        if response is not None and not isinstance(response, ResultResponse):
            log.warning("session %s: auto-recall: %s", session.id, response)
        return False
    answer, cut = cap_result(response, runtime.config.loop.tool_result_cap, None)
    on_event(ToolCallStarted(name=RECALL.name))
    number = session.state.next_call
    whole = session.keep_whole(number, response.content) if cut else None  # for replay
    record = RecallRecord(
        runtime.clock.now(),
        number,
        query,
        answer.content,
        answer.data_class,
        answer.untrusted,
        whole,
    )
    await write(session, record, durable=False)
    on_event(ToolResult(name=RECALL.name, data_class=record.data_class, truncated=cut))
    return True
