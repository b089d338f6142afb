"""Opening a new epoch at the start of a turn (docs/storage.md, "Epochs").

Decide, then write. First, with nothing written: how many of the newest turns the new epoch
carries (`session.carry_count`, within `[context] carry_fraction` of the context), a summary
of the rest, made by the model in one completion on the old epoch (its messages up to the
first carried turn, then a fixed instruction, thinking off, a token cap: a prefix of what
the server's slot holds), and the summaries the new epoch opens with before it
(`session.next_history`: a level's oldest made into one of the level above, a completion each,
when they pass their budget). With `[tiers] summary` set to another server, each of those
completions is asked there first, a conversation of its own (its own slot there, or none:
never a session's), when that server's context holds it; else, or when it fails, on the
session's slot as without a tier. The session's own slot is not touched by it, so its cache is
as the epoch's last turn left it. A failure or a cancel there leaves the session as it was. Then,
both with no checkpoint between them: `epoch_end` goes into the old log, durably (the
decision), and the new epoch's files are put in place (`OpenSession.begin_epoch`). A crash
between the two is finished by the next resume from the `epoch_end` alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import trio
from attrs import frozen

from ...proto import (
    ChatEvent,
    ChatMessage,
    ChatRequest,
    Completion,
    EpochEndRecord,
    EpochStart,
    Progress,
    Queued,
    Retrying,
    SummaryPart,
    Timestamp,
    UserMessage,
    UserRecord,
    Waiting,
    encode,
    encode_messages,
    unstructure,
)
from ...session import (
    Merge,
    carry_count,
    merge_text,
    merged,
    next_history,
    open_reason,
    opening_parts,
    request_messages,
    request_tools,
    secret,
    summary_cap,
    summary_messages,
    tail_turns,
    tainted,
    tier_holds,
    tokens_per_byte,
    trimmed,
)
from ...store import OpenSession
from ..cache import before_request
from ..infer import InferError, context_sizes
from .errors import InferFailed
from .runtime import OnTurnEvent, Runtime

__all__ = ["SUMMARY_ATTEMPTS", "open_epoch", "open_epoch_if_due"]

log = logging.getLogger("loopd")

SUMMARY_ATTEMPTS = 3  # the summary request, then at most two cut down after a refusal
SUMMARY = "summary"  # the tier an epoch's summary and its merges are asked of first
_PASSED_ON = (Queued, Waiting, Progress, Retrying)  # of the summary's events (not its text)


@frozen
class Summary:
    text: str | None
    tokens: int = 0
    cache_n: int = 0
    prompt_n: int = 0


async def open_epoch_if_due(
    session: OpenSession, runtime: Runtime, on_event: OnTurnEvent, *, requested: bool
) -> None:
    """Open a new epoch before the turn's user message when one is due: the channel asked
    for it (`requested`), the epoch's last turn was refused for its size part-way, or its
    conversation is past `[context] epoch_at`. A switch left half done is finished first."""
    if isinstance(session.records[-1], EpochEndRecord):
        await trio.lowlevel.checkpoint_if_cancelled()
        _begin_epoch(session, runtime.clock.now())
    if requested:
        if any(isinstance(r, UserRecord) for r in reversed(session.records)):
            await open_epoch(session, runtime, on_event, "the channel asked for one")
        return
    n_ctx = await runtime.client_of(session.slot).context_size(session.slot)
    epoch_at = runtime.config.context.epoch_at
    if (reason := open_reason(session.records, session.state.head, n_ctx, epoch_at)) is not None:
        await open_epoch(session, runtime, on_event, reason)


def _begin_epoch(session: OpenSession, now: Timestamp) -> None:
    """`session.begin_epoch`, saying so when the new baseline kept the last one's memory
    (read here, in the event loop, as the rest of the switch: a worker thread would let a
    mock clock jump)."""
    session.begin_epoch(now)
    if session.memory_problem is not None:
        log.warning("session %s: %s", session.id, session.memory_problem)


async def open_epoch(
    session: OpenSession, runtime: Runtime, on_event: OnTurnEvent, reason: str
) -> None:
    """Close the session's epoch and go on in a new one; emits `epoch_start`.

    Raises:
        InferFailed: the summary could not be asked for (not for its size: then the new
            epoch opens without one); nothing was written.
        SessionError: the store could not write (the switch is finished from the old log's
            `epoch_end` when the session is next opened, if that was written).
    """
    context, clock = runtime.config.context, runtime.clock
    records, baseline = session.records, session.baseline
    n_ctx = await runtime.client_of(session.slot).context_size(session.slot)
    carried = 0
    ratio = tokens_per_byte(baseline, records, session.state.head.own_from)
    if n_ctx:
        fits = carry_count(baseline, records, context.carry_fraction * n_ctx, ratio)
        # At least one turn is summarised: a switch that carried everything would change nothing.
        carried = min(fits, max(len(tail_turns(records, len(records))) - 1, 0))
    summary = await _summarize(session, runtime, carried, n_ctx, ratio, on_event)
    merges: list[str] = []  # each merge's text, kept for replay
    history = await _history(session, runtime, summary.text, n_ctx, ratio, on_event, merges)
    end = EpochEndRecord(
        time=clock.now(),
        epoch=session.epoch,
        summary=summary.text,
        summary_tokens=summary.tokens,
        cache_n=summary.cache_n,
        prompt_n=summary.prompt_n,
        carried_turns=carried,
        history=tuple(history),
        merges=tuple(merges),
        tainted=tainted(records),  # the summary is the model's words after what it read
        secret=secret(records),
    )
    session.append(end)  # begun, so finished: no checkpoint until the switch is made
    _begin_epoch(session, clock.now())
    log.info(
        "session %s: epoch %d opened (%s): %d turns carried, %s",
        session.id,
        session.epoch,
        reason,
        carried,
        f"a summary of {summary.tokens} tokens" if summary.text else "no summary",
    )
    on_event(EpochStart(session.epoch, carried, summary.tokens))


async def _summarize(
    session: OpenSession,
    runtime: Runtime,
    carried: int,
    n_ctx: int | None,
    ratio: float,
    on_event: OnTurnEvent,
) -> Summary:
    """The model's summary of the epoch up to its first carried turn: of the summary tier
    (`_on_tier`), else of the session's server. If the session's server refuses the request
    for its size, it is cut down (`trimmed`) and asked again, at most `SUMMARY_ATTEMPTS` times
    in all; then the epoch opens without a summary."""
    baseline, records = session.baseline, session.records
    cap = summary_cap(runtime.config.context.summary_max_tokens, n_ctx)
    conversation = session.request_messages()  # what the server's slot holds
    # Its images named by their hashes, as the epoch's sizes measure them; each request
    # carries their bytes (`filled`).
    said = summary_messages(baseline, records, carried, session.state.messages)
    forward = _forwarding(on_event)
    request = ChatRequest(
        slot=session.slot,
        messages=said,
        tools=request_tools(baseline),
        thinking=False,
        max_tokens=cap,
    )
    completion = await _on_tier(session, runtime, request, ratio, on_event)
    for attempt in range(1, SUMMARY_ATTEMPTS + 1):
        if completion is not None:
            break
        request = attrs.evolve(request, messages=said)
        filled = attrs.evolve(request, messages=session.files.with_images(said))
        try:
            async with runtime.client.slot(session.slot, forward) as slot:
                # The first asks the watch, as a turn's request does: a server restarted since
                # the last turn is said (`cache_cold`), and a save of the conversation (which
                # this request shares its start with) is restored.
                if attempt == 1:
                    cold = await before_request(runtime.watch, session, conversation)
                    if cold is not None:
                        on_event(cold)
                completion = await slot.chat_with_retry(filled, forward)
        except InferError as error:
            sizes = context_sizes(error)
            if sizes is None:
                raise InferFailed(error) from error
            prompt, n_ctx = sizes
            # Bytes for tokens at this request's own ratio, a tenth less each time.
            room = (n_ctx - cap) * (1 - attempt / 10) * _size(request) / prompt
            said = trimmed(baseline, records, carried, int(room))
    text = (completion.content or "").strip() if completion is not None else ""
    if completion is not None and text:
        timings = completion.timings
        return Summary(text, timings.predicted_n, timings.cache_n, timings.prompt_n)
    # Refused every time, or the model said nothing (or only called a tool): no summary.
    log.warning("session %s: the epoch opens without a summary", session.id)
    return Summary(None)


async def _on_tier(
    session: OpenSession,
    runtime: Runtime,
    request: ChatRequest,
    ratio: float,
    on_event: OnTurnEvent,
) -> Completion | None:
    """`request` asked of `[tiers] summary`'s server, as a conversation of its own: on the
    tier's own slot there, or none, so it reuses no cache and takes no session's slot. None,
    and the session's server is asked as without a tier, when no tier is set, the tier is the
    session's own server (whose slot holds the epoch: a prefix of it costs less), its context
    does not hold the request (`tier_holds`, at `ratio` tokens a byte, with its cap), or the
    request failed there."""
    tier = await runtime.tier(SUMMARY)
    if tier is None:
        return None
    client, n_ctx = tier
    if client is runtime.client_of(session.slot):
        return None
    tokens, cap = ratio * _size(request), request.max_tokens or 0
    if not tier_holds(tokens, cap, n_ctx):
        log.info(
            "session %s: server %s's context (%s tokens) does not hold a summary request of "
            "about %d tokens and its %d: the session's server is used",
            session.id,
            client.name,
            "unknown" if n_ctx is None else f"{n_ctx:,}",
            tokens,
            cap,
        )
        return None
    forward = _forwarding(on_event)
    try:
        async with client.tier_slot(SUMMARY, forward) as slot:
            filled = session.files.with_images(request.messages)
            asked = attrs.evolve(request, slot=SUMMARY, messages=filled)
            return await slot.chat_with_retry(asked, forward)
    except InferError as error:
        log.warning(
            "session %s: the summary tier, server %s, failed (%s): the session's server is used",
            session.id,
            client.name,
            error,
        )
        return None


async def _history(
    session: OpenSession,
    runtime: Runtime,
    summary: str | None,
    n_ctx: int | None,
    ratio: float,
    on_event: OnTurnEvent,
    merges: list[str],
) -> list[SummaryPart]:
    """The summaries the next epoch opens with before the new one (`summary`, of this epoch's
    own turns): those this epoch opened with, a level's oldest made into one summary of the
    level above while they pass their budget (`session.next_history`). A merge the server
    refuses for its size leaves those summaries to `recall` (the opening stays in its room);
    one that fails otherwise, or gives no text, leaves them as they are, over the budget,
    until the next switch tries again (the summary already made is not thrown away). Each
    merge's text is added to `merges`."""
    context = runtime.config.context
    parts = opening_parts(session.records, session.state.head)
    new = None
    if summary is not None:
        records = session.records
        new = SummaryPart(
            1, session.epoch, session.epoch, summary, tainted(records), secret(records)
        )
        parts.append(new)
    total = context.history_fraction * n_ctx if n_ctx else 4 * context.summary_max_tokens
    cap = summary_cap(context.summary_max_tokens, n_ctx)
    while True:
        step = next_history(parts, total, ratio)
        if not isinstance(step, Merge):
            return [part for part in step if part is not new]
        try:
            text = await _merge(session, runtime, step, cap, ratio, on_event)
        except InferError as error:
            if context_sizes(error) is not None:  # refused for its size
                parts = [part for part in parts if part not in step.parts]
                log.warning(
                    "session %s: %d summaries could not be merged and are left to recall",
                    session.id,
                    len(step.parts),
                )
                continue
            log.warning("session %s: a merge of summaries failed: %s", session.id, error)
            text = None
        if text is None:
            log.warning(
                "session %s: %d summaries could not be merged this time",
                session.id,
                len(step.parts),
            )
            return [part for part in parts if part is not new]
        merges.append(text)
        parts = merged(parts, step, text)


async def _merge(
    session: OpenSession,
    runtime: Runtime,
    merge: Merge,
    cap: int,
    ratio: float,
    on_event: OnTurnEvent,
) -> str | None:
    """The model's summary of `merge`'s summaries, one level up (of the summary tier, else of
    the session's server); None when it gave no text.

    Raises:
        InferError: the request failed (`context_sizes` says whether for its size).
    """
    baseline = session.baseline
    request = ChatRequest(
        slot=session.slot,
        messages=(*request_messages(baseline, ()), UserMessage(merge_text(merge))),
        tools=request_tools(baseline),
        thinking=False,
        max_tokens=cap,
    )
    completion = await _on_tier(session, runtime, request, ratio, on_event)
    if completion is None:
        forward = _forwarding(on_event)
        async with runtime.client.slot(session.slot, forward) as slot:
            completion = await slot.chat_with_retry(request, forward)
    return (completion.content or "").strip() or None


def _forwarding(on_event: OnTurnEvent) -> Callable[[ChatEvent], None]:
    """The events of a summary's request the channel gets: its wait and progress, never its
    text."""

    def forward(event: ChatEvent) -> None:
        if isinstance(event, _PASSED_ON):
            on_event(event)

    return forward


def _size(request: ChatRequest) -> int:
    messages: tuple[ChatMessage, ...] = request.messages
    return len(encode_messages(messages)) + len(encode(unstructure(request.tools)))
