"""Running one tool call of a turn: who answers it (`tool_calls.decide`), the record that
says it went to brokerd, the owner's approval when brokerd asks for it, and the answer as
the model's result (SPEC sections 6 and 14).

A `call_sent` record is written (durably) before the request leaves: a call with it and no
result went out and its outcome is unknown, and healing says so; one without was never sent.
Nothing here runs a call again by itself.
"""

from __future__ import annotations

from collections.abc import Callable

from ...proto import (
    Answer,
    ApprovalAnswered,
    ApprovalNeeded,
    ApprovalRecord,
    ApprovedBy,
    CallSentRecord,
    DeniedResponse,
    Mode,
    PendingApprovalResponse,
    ResultResponse,
    ToolCall,
    ToolRequest,
    ToolResponse,
)
from ...session import secret, tainted
from ...store import OpenSession
from ...tools import Port, ReadBack, answer_of, failed
from .results import read_result
from .runtime import OnTurnEvent, Runtime, write
from .tool_calls import decide

__all__ = ["NOBODY", "SAID_NO", "TIMED_OUT", "CanAsk", "ask_owner", "never", "run_call"]

CanAsk = Callable[[], bool]
"""Whether a question can be put to the owner now: the turn's channel can ask, or, for a
turn that outlived its channel, a watcher of the session that can."""


def never() -> bool:
    return False


NOBODY = (
    "it needs the owner's approval, and nobody could be asked (this channel cannot ask: "
    "bxctl chat asks at a terminal, or approves with --yes); it was not run"
)
TIMED_OUT = "it needs the owner's approval, and no answer came within {:g} s; it was not run"
SAID_NO = "the owner said no; it was not run"


async def run_call(
    session: OpenSession,
    rt: Runtime,
    on_event: OnTurnEvent,
    call: ToolCall,
    number: int,
    *,
    can_ask: CanAsk,
    mode: Mode = Mode.AUTO,
) -> ResultResponse:
    """The result the model gets for `call` (call number `number`); never raises for the
    tool's sake."""
    decision = decide(session.baseline, call)
    if isinstance(decision, ReadBack):
        return read_result(session, decision, rt.config.loop.tool_result_cap)
    if not isinstance(decision, Port):
        return decision
    request = ToolRequest(
        session=session.id,
        call=number,
        tool=decision.tool,
        arguments=decision.arguments,
        definition=decision.definition,
        tainted=tainted(session.records),
        turn=session.index.turns + 1,
        first_turn=session.first_turn,
        secret=secret(session.records),
        identity=session.identity,
        mode=mode,
    )
    await write(session, CallSentRecord(rt.clock.now(), number, call.id))
    try:
        response = await rt.port.call(request)
        if isinstance(response, PendingApprovalResponse):
            response = await ask_owner(session, rt, on_event, request, response, can_ask=can_ask)
    except Exception as exc:  # a tool failure is data for the model, never a crash
        return failed(f"The tool failed: {exc}")
    return answer_of(response)


async def ask_owner(
    session: OpenSession,
    rt: Runtime,
    on_event: OnTurnEvent,
    request: ToolRequest,
    pending: PendingApprovalResponse,
    *,
    can_ask: CanAsk,
) -> ToolResponse:
    """Put the waiting call to the owner (when the turn's channel can ask), keep the answer
    in the log, and give it to the port: the call's own response, or its refusal."""
    asked = rt.clock.now()
    timeout = rt.config.tools.approval_timeout_s
    by, answer = ApprovedBy.NOBODY, Answer.DENY
    if can_ask():
        once = pending.only_once
        on_event(ApprovalNeeded(pending.id, request.tool, pending.summary, pending.detail, once))
        given = await rt.approvals.wait(
            session.id, pending.id, request.tool, pending.summary, timeout, pending.detail, once
        )
        if once and given in (Answer.SESSION, Answer.ALWAYS):
            given = Answer.ONCE  # the session's ask mode grants nothing past this call
        by, answer = (ApprovedBy.CHANNEL, given) if given else (ApprovedBy.TIMEOUT, Answer.DENY)
        on_event(ApprovalAnswered(pending.id, answer))
    record = ApprovalRecord(
        rt.clock.now(), request.call, pending.id, pending.summary, asked, answer, by
    )
    await write(session, record)
    response = await rt.port.approve(session.id, pending.id, answer)
    if answer is not Answer.DENY:
        return response
    reason = {ApprovedBy.NOBODY: NOBODY, ApprovedBy.TIMEOUT: TIMED_OUT.format(timeout)}
    return DeniedResponse(reason.get(by, SAID_NO))
