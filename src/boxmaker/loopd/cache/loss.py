"""The prompt cache around one request of a session: what the watch is told before it goes out
(and the expected miss said before the answer), and the `cache_loss` record after a
completion whose prefix the server lost, with its cause.

For a loss, the previous request is replayed from the log (everything before the last
`assistant` record) and compared with the one just sent, which the session built
incrementally: two roads to the same bytes, so a difference is a bug (`first_difference`).
"""

from __future__ import annotations

from collections.abc import Callable

from ...proto import (
    AssistantRecord,
    CacheCold,
    CacheLossRecord,
    ChatMessage,
    Completion,
    LossCause,
    Timestamp,
    Timings,
)
from ...session import request_messages
from ...store import OpenSession
from .outcome import Loss, cache_outcome, explain_loss, first_difference
from .watch import LossWatch

__all__ = ["before_request", "loss_record"]


async def before_request(
    watch: LossWatch | None,
    session: OpenSession,
    messages: tuple[ChatMessage, ...],
) -> CacheCold | None:
    """Tell the watch, holding the slot's gate, that a request of `session` starting with
    `messages` goes out next (the watch may restore a save of them). When the watch knows the
    server restarted since the session's previous request (and nothing restored its prefix),
    the miss to come is said before the answer: a `cache_cold` event. Not for the first
    request of an epoch: there is no prefix to lose, and `epoch_start` says what happened."""
    if watch is None:
        return None
    told = await watch.before_request(str(session.id), session.slot, messages)
    if told is None or session.last_usage() is None:
        return None
    return CacheCold(LossCause.SERVER_RESTARTED, f"the server restarted: {told}")


async def loss_record(
    session: OpenSession,
    sent: tuple[ChatMessage, ...],
    completion: Completion,
    watch: LossWatch | None,
    now: Callable[[], Timestamp],
) -> CacheLossRecord | None:
    """The `cache_loss` record of `completion`, the answer to the request `sent`, when the
    server reused less of the session's previous prompt than it should have; None for a hit
    or a first request. Asked before the
    completion is appended; never raises for what the watch could not learn."""
    previous = session.last_usage()
    if previous is None:
        return None
    before = Timings(previous.cache_n, previous.prompt_n, previous.predicted_n, 0.0, 0.0)
    outcome = cache_outcome(before, completion.timings, completion.cache_block)
    if not isinstance(outcome, Loss):
        return None
    records = session.records
    last = next(
        (i for i in range(len(records) - 1, -1, -1) if isinstance(records[i], AssistantRecord)),
        None,
    )
    replayed = request_messages(session.baseline, records[:last]) if last is not None else ()
    change = first_difference(replayed, sent)
    restart, taken = (None, None)
    if watch is not None:
        restart, taken = await watch.after_loss(str(session.id), session.slot)
    cause, detail = explain_loss(change, restart, taken)
    return CacheLossRecord(
        time=now(), expected=outcome.expected, got=outcome.got, cause=cause, detail=detail
    )
