"""The thinking cap, counted in tokens (the server merges tokens it holds back into fewer
reasoning deltas: 16 tokens came as 14 in `recordings/thinking_capped.http`).

A `ChunkFold` counts one token per reasoning delta, a lower bound. `ThinkingWatch` makes it
exact where it matters, by asking the server:

- mid-stream, for the backstop (the client stops a stream whose reasoning runs past the cap
  by the margin, when the server does not enforce the budget): each time the reasoning could
  have come halfway closer to that limit, its text so far is counted by the server's
  tokenizer (`count`: llama-server's `/tokenize`; an OpenAI-style server has none, and its
  deltas are the count);
- at the end: the server's own figure where it gives one (vLLM's
  `completion_tokens_details.reasoning_tokens`), else, when the cap is in question (reasoning,
  and at least the cap's worth of tokens generated in all), the tokenizer's count of the whole
  reasoning. A completion far below the cap costs no request. Reasoning that ends in white
  space counts one token more: the server holds back a white-space token until it knows
  what follows, and one held when the budget ends reasoning is never sent
  (`recordings/thinking_capped.http`: a budget of 16, 14 deltas, 15 tokens in their text).

A count that cannot be had (the server refused, a timeout) leaves the lower bound as it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ...proto import ChatEvent
from .errors import InferError
from .request import thinking_margin
from .stream import ChunkFold

__all__ = ["Count", "ThinkingWatch", "tokenizer_count"]

Count = Callable[[str], Awaitable[int | None]]
MIN_STEP = 8  # reasoning deltas between two counts, at least


class _Asks(Protocol):
    async def call_json(self, method: str, path: str, body: Any = None) -> Any: ...


async def tokenizer_count(server: _Asks, text: str) -> int | None:
    """Tokens in `text` by llama-server's tokenizer (`POST /tokenize`); None if it cannot
    say."""
    try:
        answer = await server.call_json(
            "POST", "/tokenize", {"content": text, "parse_special": True}
        )
    except InferError:
        return None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    return len(tokens) if isinstance(tokens, list) else None


class ThinkingWatch:
    """Counts one completion's reasoning tokens; `cap` is None when thinking is off."""

    def __init__(self, fold: ChunkFold, cap: int | None, count: Count | None) -> None:
        self._fold = fold
        self._count = count
        self._limit = None if cap is None else cap + thinking_margin(cap)
        self._next = 0 if self._limit is None else self._limit // 2  # in reasoning deltas

    async def past_limit(self, on_event: Callable[[ChatEvent], None]) -> bool:
        """After each chunk: whether reasoning ran past the cap by the margin (counting it
        with the server's tokenizer once it may have come halfway closer)."""
        fold, limit = self._fold, self._limit
        if limit is None:
            return False
        if fold.reasoning_tokens <= limit and self._count and fold.reasoning_deltas >= self._next:
            at, text = fold.reasoning_deltas, fold.reasoning_text
            tokens = await self._count(text)
            if tokens is not None:
                for event in fold.counted(tokens, at):
                    on_event(event)
            self._next = at + max((limit - fold.reasoning_tokens) // 2, MIN_STEP)
        return fold.reasoning_tokens > limit

    async def settle(self, on_event: Callable[[ChatEvent], None]) -> None:
        """At the end of the stream: the exact count where the cap is in question."""
        fold = self._fold
        if self._limit is None or not fold.done:
            return
        tokens = fold.server_reasoning_tokens
        if tokens is None and self._count is not None and fold.undecided():
            text = fold.reasoning_text
            tokens = await self._count(text)
            if tokens is not None and text[-1:].isspace():
                tokens += 1  # a white-space token held back at the end, never sent
        if tokens is not None:
            for event in fold.counted(tokens):
                on_event(event)
