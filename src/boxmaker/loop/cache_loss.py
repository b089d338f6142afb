"""The `cache_loss` record of a completion whose prefix the server lost, with its cause.

The previous request is replayed from the log (everything before the last `assistant`
record) and compared with the one just sent, which the session built incrementally: two
roads to the same bytes, so a difference is a bug (`cache_cause.first_difference`). What the
daemon saw of the server and the slot comes from its `LossWatch`, when it has one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..proto import (
    AssistantRecord,
    CacheCold,
    CacheLossRecord,
    ChatMessage,
    ChatRequest,
    LossCause,
    Timestamp,
)
from ..session import request_messages
from ..store import Session
from .cache_cause import LossWatch, explain_loss, first_difference
from .runtime import OnTurnEvent

__all__ = ["before_request", "cache_loss_record"]


def before_request(
    watch: LossWatch | None,
    session: Session,
    request: ChatRequest,
    on_event: OnTurnEvent,
    *,
    continues: tuple[ChatMessage, ...] | None = None,
) -> Callable[[], Awaitable[None]] | None:
    """What the client runs holding the slot's gate before `request` goes out: the watch's
    `before_request`, when there is a watch. When the watch knows the server restarted since
    the session's previous request (and nothing restored its prefix), the expected miss is
    said before the answer: a `cache_cold` event. Not for the first request of an epoch
    (there is no prefix to lose: `epoch_start` says what happened).

    `continues`: the conversation the request shares its start with, when it does not extend
    all of it (an epoch's summary request stops at the first carried turn): a save of that
    conversation is restored for it, as the server then reuses the part they share."""
    if watch is None:
        return None
    held = session.last_usage() is not None  # the server had this request's prefix
    messages = request.messages if continues is None else continues

    async def prepare() -> None:
        told = await watch.before_request(str(session.id), request.slot, messages)
        if told is not None and held:
            on_event(CacheCold(LossCause.SERVER_RESTARTED, f"the server restarted: {told}"))

    return prepare


async def cache_loss_record(
    session: Session,
    sent: tuple[ChatMessage, ...],
    watch: LossWatch | None,
    now: Callable[[], Timestamp],
    expected: int,
    got: int,
) -> CacheLossRecord:
    """The record for a loss of `expected - got` tokens on the request `sent`, before its
    completion is appended. Never raises for what the watch could not learn."""
    records = session.records
    last = next(
        (i for i in range(len(records) - 1, -1, -1) if isinstance(records[i], AssistantRecord)),
        None,
    )
    before = request_messages(session.baseline, records[:last]) if last is not None else ()
    change = first_difference(before, sent)
    restart, taken = (None, None)
    if watch is not None:
        restart, taken = await watch.after_loss(str(session.id), session.slot)
    cause, detail = explain_loss(change, restart, taken)
    return CacheLossRecord(time=now(), expected=expected, got=got, cause=cause, detail=detail)
