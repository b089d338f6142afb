"""A sans-IO fold of a streamed chat completion's chunks into `ChatEvent`s and one `Completion`.

Each SSE payload goes to `feed()`, which returns the events it carries; `finish()` gives the
completion once `[DONE]` was seen. The rules (SPEC section 4, and the server's wire as
`reference/llama-server-wire.md` describes it):

- content and reasoning are the concatenation of their deltas, `None` when there were none
  (an empty delta is none: an OpenAI-style server opens with `"content": ""`);
- reasoning is `reasoning_content` (llama-server) or `reasoning` (vLLM, Ollama);
- tool calls are assembled by `index`: id and name from the first delta that has them, a
  later name replaces the earlier one, argument fragments are concatenated;
- `timings` comes from the last chunk that carries it, else (an OpenAI-style server) from
  `usage`; `prompt_progress` gives `Progress`;
- `reasoning_tokens` counts reasoning tokens: at least one per reasoning delta, more once
  the server's own count or its tokenizer says so (`counted`; the server merges tokens it
  holds back into fewer deltas). When the count reaches `thinking_cap`, one
  `ThinkingCapped` is emitted and the completion marked;
- an `{"error": ...}` payload raises `Stream`; a stream that ends without `[DONE]`, anything
  after it, or a chunk of the wrong shape raises `Protocol`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...proto import (
    ChatEvent,
    Completion,
    Content,
    DecodeError,
    Progress,
    Reasoning,
    ThinkingCapped,
    Timings,
    ToolCall,
    ToolCallDelta,
    parse_json,
)
from .errors import ProtocolError, Stream
from .sse import END, NEED_DATA, SSEDecoder, SSEError

__all__ = ["ChunkFold", "drain"]

DONE = "[DONE]"


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class ChunkFold:
    """Folds one streamed completion. `thinking_cap` is `None` when thinking is off."""

    def __init__(self, thinking_cap: int | None = None) -> None:
        self._cap = thinking_cap
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._finish_reason: str | None = None
        self._timings: Timings | None = None
        self._usage: dict[str, Any] | None = None
        self.reasoning_deltas = 0
        self._counted = (0, 0)  # (tokens, deltas) when the tokens were last counted
        self.reasoning_tokens = 0  # at least this many: a lower bound until counted
        self.thinking_capped = False
        self.done = False

    @property
    def reasoning_text(self) -> str:
        return "".join(self._reasoning)

    @property
    def predicted_n(self) -> int | None:
        """Every token the server generated, when it said (its final figures)."""
        if self._timings is not None:
            return self._timings.predicted_n
        tokens = self._usage.get("completion_tokens") if self._usage else None
        return tokens if type(tokens) is int else None

    @property
    def server_reasoning_tokens(self) -> int | None:
        """The server's own count of reasoning tokens (vLLM with a reasoning parser)."""
        details = self._usage.get("completion_tokens_details") if self._usage else None
        tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
        return tokens if type(tokens) is int else None

    def undecided(self) -> bool:
        """Whether the cap may have been reached although the count so far says not: there
        was reasoning, and the server generated at least the cap's worth of tokens in all."""
        total = self.predicted_n
        return (
            self._cap is not None
            and self.reasoning_deltas > 0
            and not self.thinking_capped
            and (total is None or total >= self._cap)
        )

    def counted(self, tokens: int, at_deltas: int | None = None) -> list[ChatEvent]:
        """The reasoning so far (up to delta `at_deltas`, all of it when None) is `tokens`
        tokens; returns `ThinkingCapped` if that reaches the cap."""
        at = self.reasoning_deltas if at_deltas is None else at_deltas
        if tokens > self._counted[0] + (at - self._counted[1]):
            self._counted = (tokens, at)
        return self._recount()

    def _recount(self) -> list[ChatEvent]:
        tokens, at = self._counted
        self.reasoning_tokens = max(self.reasoning_deltas, tokens + self.reasoning_deltas - at)
        if (
            self._cap is not None
            and not self.thinking_capped
            and self.reasoning_tokens >= self._cap
        ):
            self.thinking_capped = True
            return [ThinkingCapped(tokens=self.reasoning_tokens)]
        return []

    def feed(self, payload: str) -> list[ChatEvent]:
        """The events of one SSE `data` payload.

        Raises:
            Stream: the payload is the server's error event.
            ProtocolError: the payload is not a chunk of the server's stream.
        """
        if self.done:
            raise ProtocolError(f"data after [DONE]: {payload[:100]!r}")
        if payload == DONE:
            self.done = True
            return []
        try:
            chunk = parse_json(payload)
        except DecodeError as exc:
            raise ProtocolError(f"a stream chunk is {exc}") from exc
        if not isinstance(chunk, dict):
            raise ProtocolError(f"a stream chunk is not an object: {payload[:100]!r}")
        if "error" in chunk:
            raise _stream_error(chunk["error"])
        events: list[ChatEvent] = []
        if (progress := chunk.get("prompt_progress")) is not None:
            events.append(
                Progress(
                    total=_int(progress, "total"),
                    cache=_int(progress, "cache"),
                    processed=_int(progress, "processed"),
                )
            )
        choices = _typed(chunk, "choices", list, [])
        if choices:
            choice = _typed({"choice": choices[0]}, "choice", dict)
            self._delta(_typed(choice, "delta", dict, {}), events)
            if (reason := _typed(choice, "finish_reason", str, None)) is not None:
                self._finish_reason = reason
        if (usage := chunk.get("usage")) is not None:
            self._usage = _typed({"usage": usage}, "usage", dict)
        if (timings := chunk.get("timings")) is not None:
            self._timings = Timings(
                cache_n=_int(timings, "cache_n"),
                prompt_n=_int(timings, "prompt_n"),
                predicted_n=_int(timings, "predicted_n"),
                prompt_ms=_float(timings, "prompt_ms"),
                predicted_ms=_float(timings, "predicted_ms"),
            )
        return events

    def _delta(self, delta: dict[str, Any], events: list[ChatEvent]) -> None:
        if text := _typed(delta, "content", str, None):
            self._content.append(text)
            events.append(Content(text=text))
        reasoning = _typed(delta, "reasoning_content", str, None)
        if reasoning is None:  # vLLM's and Ollama's name for it
            reasoning = _typed(delta, "reasoning", str, None)
        if reasoning:
            self._reasoning.append(reasoning)
            self.reasoning_deltas += 1
            events.append(Reasoning(text=reasoning))
            events += self._recount()
        for entry in _typed(delta, "tool_calls", list, []):
            events.append(self._tool_call(_typed({"tool_call": entry}, "tool_call", dict)))

    def _tool_call(self, entry: dict[str, Any]) -> ToolCallDelta:
        index = _int(entry, "index")
        call = self._calls.setdefault(index, _Call())
        function = _typed(entry, "function", dict, {})
        call_id = _typed(entry, "id", str, None)
        name = _typed(function, "name", str, None)
        arguments = _typed(function, "arguments", str, None) or ""
        if call.id is None:
            call.id = call_id
        if name is not None:
            call.name = name
        call.arguments.append(arguments)
        return ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments)

    def finish(self, cache_block: int = 1) -> Completion:
        """The completion, once the stream is over; `cache_block` is the server's (0 when
        it reported no cached tokens).

        Raises:
            ProtocolError: the stream ended before `[DONE]`, or lacked a finish reason, timings
                (or usage), or a tool call's id or name.
        """
        if not self.done:
            raise ProtocolError("the stream ended before [DONE]", cut=True)
        timings, reported = self._timings, True
        if timings is None and self._usage is not None:
            timings, reported = _timings_of(self._usage)
        if self._finish_reason is None or timings is None:
            raise ProtocolError("the stream ended without a finish_reason and timings")
        calls: list[ToolCall] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if call.id is None or call.name is None:
                raise ProtocolError(f"tool call {index} has no id or no name")
            calls.append(ToolCall(id=call.id, name=call.name, arguments="".join(call.arguments)))
        return Completion(
            content="".join(self._content) if self._content else None,
            reasoning_content="".join(self._reasoning) if self._reasoning else None,
            tool_calls=tuple(calls) if calls else None,
            finish_reason=self._finish_reason,
            timings=timings,
            reasoning_tokens=self.reasoning_tokens,
            thinking_capped=self.thinking_capped,
            cache_block=cache_block if reported else 0,
        )


def _timings_of(usage: dict[str, Any]) -> tuple[Timings, bool]:
    """Timings from an OpenAI-style `usage` (no times), and whether it said how many prompt
    tokens came from the cache (`prompt_tokens_details.cached_tokens`)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt = _int(usage, "prompt_tokens")
    reported = type(cached) is int
    cache_n = cached if type(cached) is int else 0
    predicted = _int(usage, "completion_tokens")
    return Timings(cache_n, prompt - cache_n, predicted, 0.0, 0.0), reported


_MISSING: Any = object()


def _typed(obj: Any, key: str, kind: type, default: Any = _MISSING) -> Any:
    """`obj[key]` if it is a `kind`; `default` when absent or null; else a ProtocolError error."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected an object holding {key!r}, got {obj!r:.100}")
    value = obj.get(key)
    if value is None and default is not _MISSING:
        return default
    if type(value) is not kind:
        raise ProtocolError(f"expected {key!r} to be {kind.__name__}, got {value!r:.100}")
    return value


def _int(obj: Any, key: str) -> int:
    value: int = _typed(obj, key, int)
    return value


def _float(obj: Any, key: str) -> float:
    if isinstance(obj, dict) and type(obj.get(key)) is int:
        return float(obj[key])
    value: float = _typed(obj, key, float)
    return value


def _stream_error(detail: Any) -> Stream:
    if not isinstance(detail, dict):
        return Stream(None, str(detail), "unknown")
    code = detail.get("code")
    return Stream(
        code if type(code) is int else None,
        str(detail.get("message", "")),
        str(detail.get("type", "unknown")),
    )


def drain(decoder: SSEDecoder, fold: ChunkFold, on_event: Callable[[ChatEvent], None]) -> None:
    """Fold every whole event `decoder` holds, passing on what each gives.

    Raises:
        ProtocolError: the stream is not SSE.
    """
    while True:
        try:
            payload = decoder.next_event()
        except SSEError as exc:
            raise ProtocolError(str(exc)) from exc
        if payload is NEED_DATA or payload is END:
            return
        assert isinstance(payload, str)
        for event in fold.feed(payload):
            on_event(event)
