"""Asking for one completion of a turn: the slot's gate held, the prompt cache's watch told,
the stream's events shown as they come, and an answer that starts repeating itself stopped.

The turn holds the slot's gate itself (`Client.slot`), tells the watch the request is next
(a save restored, or the miss to come said: `cache_cold`), then asks for the completion
there. Each event goes to the channel through `Shown` (no tool-call fragments, no tool
blocks' text), once the turn's user message is durable: the first event of the request is
when the disk and the server have both done their part.

A stream whose text is certainly degenerate (`RepetitionWatch`) is stopped at once (its HTTP
stream closed, as for a cancel) and kept as a completion cut short, with the figures it had:
its text so far, the prompt's tokens from its progress, a token for each delta. SPEC section
4's rule for a cancelled request (nothing appended) does not apply: the text was the model's
answer, shown as it came, and the turn ends with it (docs/decisions.md).
"""

from __future__ import annotations

import trio
from attrs import define, field

from ...proto import (
    ChatEvent,
    ChatRequest,
    Completion,
    Content,
    Progress,
    Reasoning,
    Repetition,
    Retrying,
    Timings,
    ToolCallDelta,
)
from ...session import request_tools
from ...store import OpenSession
from ..cache import before_request
from ..infer import InferError, is_context_full
from .errors import InferFailed, SessionFull
from .repetition import RepetitionWatch
from .runtime import OnTurnEvent, Runtime
from .tool_calls import Shown

__all__ = ["STOPPED", "Asked", "ask"]

STOPPED = "repetition"  # a completion's finish_reason when loopd stopped its stream


@define
class Asked:
    """A completion, and the text of it the channel was shown (a fenced session's tool
    blocks and loopd's own words left out): a turn's answer is what its person saw."""

    completion: Completion
    shown: str
    pieces: tuple[int, ...] = ()  # a stopped stream's pieces of text, each one's length


@define
class _Stream:
    """What a completion's events said so far: enough to keep it when it is stopped."""

    content: list[str] = field(factory=list)
    reasoning: list[str] = field(factory=list)
    calls: bool = False
    progress: Progress | None = None

    def take(self, event: ChatEvent) -> None:
        if isinstance(event, Retrying):
            self.content.clear()
            self.reasoning.clear()
            self.calls, self.progress = False, None
        elif isinstance(event, Content):
            self.content.append(event.text)
        elif isinstance(event, Reasoning):
            self.reasoning.append(event.text)
        elif isinstance(event, ToolCallDelta):
            self.calls = True
        elif isinstance(event, Progress):
            self.progress = event

    def cut(self, block: int) -> Completion:
        """The completion as far as it came: its figures those the stream gave."""
        progress = self.progress or Progress(0, 0, 0)
        tokens = len(self.content) + len(self.reasoning)
        timings = Timings(progress.cache, progress.total - progress.cache, tokens, 0.0, 0.0)
        return Completion(
            content="".join(self.content) or None,
            reasoning_content="".join(self.reasoning) or None,
            tool_calls=None,
            finish_reason=STOPPED,
            timings=timings,
            reasoning_tokens=len(self.reasoning),
            thinking_capped=False,
            cache_block=block,
        )


async def ask(
    session: OpenSession,
    runtime: Runtime,
    on_event: OnTurnEvent,
    *,
    thinking: bool,
) -> Asked:
    """The completion of the session's next request.

    Raises:
        SessionFull: the server refused the request for its size.
        InferFailed: any other inference failure, after the retries.
    """
    request = ChatRequest(
        slot=session.slot,
        messages=session.request_messages(),
        tools=request_tools(session.baseline),
        thinking=thinking,
    )
    shown, stream, watch = Shown(session.baseline), _Stream(), RepetitionWatch()
    seen: list[str] = []
    stop = trio.CancelScope()

    def forward(event: ChatEvent) -> None:
        session.sync()  # the user message: durable before any event is passed on
        if watch.repeated is not None:
            return  # stopped: what comes before the stream is closed is not the answer
        stream.take(event)
        if isinstance(event, Retrying):
            watch.reset()
            seen.clear()
        for each in shown(event):
            if isinstance(each, Content):
                seen.append(each.text)
                if not stream.calls and watch.feed(each.text):
                    stop.cancel()
            on_event(each)

    try:
        with stop:
            async with runtime.client.slot(request.slot, forward) as slot:
                cold = await before_request(runtime.watch, session, request.messages)
                if cold is not None:
                    on_event(cold)
                completion = await slot.chat_with_retry(request, forward)
    except InferError as error:
        if is_context_full(error):
            raise SessionFull(
                "the conversation no longer fits the server's context; the next turn opens a "
                "new epoch (a summary and the newest turns carry on)",
                error,
            ) from error
        raise InferFailed(error) from error
    if watch.repeated is not None:  # stopped (its cancel lands at the stream's next read)
        completion = stream.cut(runtime.client_of(session.slot).cache_block)
        on_event(Repetition(text=watch.repeated))
        return Asked(completion, "".join(seen), tuple(len(piece) for piece in stream.content))
    for each in shown.flush():
        if isinstance(each, Content):
            seen.append(each.text)
        on_event(each)
    return Asked(completion, "".join(seen))
