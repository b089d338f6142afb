"""What the fake streams for one completion, as parts: bytes to send, and floats for the
milliseconds of (virtual) work before the next part. Pure: the fake server sleeps and sends.

The order is the real server's: a first `prompt_progress` event (which releases the
headers), one per batch of prompt tokens, a role-only delta, one delta per token (reasoning,
then content, then each tool call: name first, then argument fragments), the finish event,
`usage` with `timings`, `[DONE]`. With thinking off the model does not reason; with a
`reasoning_budget_tokens` the fake stops reasoning there, as the server forces the end tag;
with `max_tokens`, or when the slot's context is full (the prompt and what was generated reach
`n_ctx`, as on the real server), it stops generating there and finishes with `length`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol

from attrs import define, field, frozen

from ._render import assistant_tokens, tokenize

__all__ = ["Fault", "FaultKind", "Reply", "Sent", "Timing", "Writer", "completion_parts"]


class Writer(Protocol):
    """What writes a stream's events: llama-server's `ChunkWriter`, or vLLM's."""

    def progress(self, total: int, cache: int, processed: int, time_ms: int) -> bytes: ...
    def role(self) -> bytes: ...
    def reasoning(self, text: str) -> bytes: ...
    def content(self, text: str) -> bytes: ...
    def tool_call(self, index: int, call_id: str, name: str, arguments: str | None) -> bytes: ...
    def tool_arguments(self, index: int, arguments: str) -> bytes: ...
    def finish(self, reason: str) -> bytes: ...
    def usage(
        self,
        *,
        cache_n: int,
        prompt_n: int,
        predicted_n: int,
        prompt_ms: float,
        predicted_ms: float,
        reasoning_n: int = 0,
    ) -> bytes: ...
    def done(self) -> bytes: ...


@frozen
class Reply:
    """One completion for the fake to stream. `tool_calls` are `(name, arguments)` pairs."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"


@frozen
class Timing:
    batch_size: int = 2048  # prompt tokens per progress event (the server's -b)
    prompt_ms_per_token: float = 0.0
    ms_per_token: float = 0.0
    enforce_budget: bool = True  # False: the template's reasoning tags were "not detected"
    # Every n-th reasoning token goes out with the next one, in one delta, as the real server
    # sends a token it holds back (16 tokens came as 14 deltas); 0: one delta per token.
    merge_reasoning: int = 0


@define
class Sent:
    """What a stream has sent so far: what the slot's cache holds if it stops here."""

    content: list[str] = field(factory=list)
    reasoning: list[str] = field(factory=list)
    calls: list[dict[str, Any]] = field(factory=list)

    def tokens(self) -> list[str]:
        reasoning = "".join(self.reasoning) or None
        return assistant_tokens("".join(self.content), reasoning, self.calls)


def completion_parts(
    w: Writer,
    reply: Reply,
    body: dict[str, Any],
    prompt: list[str],
    cache_n: int,
    sent: Sent,
    timing: Timing,
    new_id: Callable[[], str],
    n_ctx: int,
) -> Iterator[bytes | float]:
    total = len(prompt)
    if first := w.progress(total, cache_n, cache_n, 0):  # none from an OpenAI-style server
        yield first
    processed = cache_n
    while processed < total:
        step = min(timing.batch_size, total - processed)
        yield step * timing.prompt_ms_per_token
        processed += step
        elapsed = round((processed - cache_n) * timing.prompt_ms_per_token)
        if event := w.progress(total, cache_n, processed, elapsed):
            yield event
    yield w.role()
    kwargs = body.get("chat_template_kwargs")
    thinking = not (isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False)
    reasoning = tokenize(reply.reasoning or "") if thinking else []
    budget = body.get("reasoning_budget_tokens")
    if timing.enforce_budget and thinking and isinstance(budget, int) and budget >= 0:
        reasoning = reasoning[:budget]
    content = tokenize(reply.content or "")
    calls = [(name, arguments, tokenize(arguments)) for name, arguments in reply.tool_calls]
    # `max_tokens` counts every generated token: reasoning, content and tool calls alike.
    wanted = len(reasoning) + len(content) + sum(max(len(f), 1) for *_, f in calls)
    limit = body.get("max_tokens")
    room = limit if type(limit) is int and 0 <= limit < wanted else wanted
    room = max(min(room, n_ctx - total), 0)  # the server stops where the context is full
    cut = room < wanted
    held, merge, thoughts = "", timing.merge_reasoning, reasoning[:room]
    for position, token in enumerate(thoughts, start=1):
        yield timing.ms_per_token
        sent.reasoning.append(token)
        if merge and position % merge == 0 and position < len(thoughts):
            held += token  # held back: it goes out with the next token
            continue
        yield w.reasoning(held + token)
        held = ""
    room -= len(sent.reasoning)
    for token in content[: max(room, 0)]:
        yield timing.ms_per_token
        sent.content.append(token)
        yield w.content(token)
    room -= len(sent.content)
    for index, (name, arguments, fragments) in enumerate(calls):
        if room < max(len(fragments), 1):
            break  # a call that does not fit is not sent at all
        room -= max(len(fragments), 1)
        call_id = new_id()
        yield timing.ms_per_token
        yield w.tool_call(index, call_id, name, fragments[0] if fragments else None)
        for fragment in fragments[1:]:
            yield timing.ms_per_token
            yield w.tool_arguments(index, fragment)
        function = {"name": name, "arguments": arguments}
        sent.calls.append({"id": call_id, "type": "function", "function": function})
    if cut:
        yield w.finish("length")
    else:
        yield w.finish(reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"))
    predicted_n = len(sent.tokens()) + (0 if cut else 1)  # and the end-of-generation token
    yield w.usage(
        cache_n=cache_n,
        prompt_n=total - cache_n,
        predicted_n=predicted_n,
        prompt_ms=(total - cache_n) * timing.prompt_ms_per_token,
        predicted_ms=predicted_n * timing.ms_per_token,
        reasoning_n=len(sent.reasoning),
    )
    yield w.done()


class FaultKind(enum.Enum):
    REFUSED = "refused"  # the connection is refused
    LOADING = "loading"  # 503 while the model loads
    SERVER_ERROR = "server_error"  # 500, as for a malformed request
    CONTEXT_FULL = "context_full"  # the 400 exceed_context_size_error
    CUT = "cut"  # the connection closes after `after` events, before [DONE]
    ERROR_EVENT = "error_event"  # a `data: {"error": ...}` event after `after` events
    STALL = "stall"  # silence forever, in `phase`
    STATUS = "status"  # an error answer with `status` (401, 501, ...), as the server words it


@frozen
class Fault:
    kind: FaultKind
    after: int = 3
    phase: Literal["connect", "first_byte", "idle"] = "idle"
    status: int = 500

    def stage(self) -> Literal["connect", "answer", "stream"]:
        """Where the fault strikes: before the connection is made, instead of the answer, or
        in the middle of the stream (after `after` events)."""
        match self.kind, self.phase:
            case (FaultKind.REFUSED, _) | (FaultKind.STALL, "connect"):
                return "connect"
            case (FaultKind.CUT | FaultKind.ERROR_EVENT, _) | (FaultKind.STALL, "idle"):
                return "stream"
        return "answer"
