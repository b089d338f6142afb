"""What the client sends and when it retries: the request body and the backoff. Pure.

The body is SPEC section 4's: the messages and tools of the `ChatRequest`, streaming with
usage and progress, `cache_prompt`, the pinned `id_slot`, the thinking budget (or thinking off),
and the configured sampling keys as they are (a request's own `max_tokens` over the config's).
"""

from __future__ import annotations

import random
from typing import Any

from ..config import InferenceConfig
from ..proto import ChatRequest, encode_chat_body, unstructure

__all__ = ["backoff_ms", "encode_request", "request_body", "thinking_margin"]


def request_body(request: ChatRequest, slot_id: int, inference: InferenceConfig) -> dict[str, Any]:
    """The JSON body of `POST /v1/chat/completions` for `request` on server slot `slot_id`."""
    messages = [unstructure(message) for message in request.messages]
    return {"messages": messages, **_settings(request, slot_id, inference)}


def encode_request(request: ChatRequest, slot_id: int, inference: InferenceConfig) -> bytes:
    """`encode(request_body(...))`, the same bytes, by the hand-written path."""
    return encode_chat_body(request.messages, _settings(request, slot_id, inference))


def _settings(request: ChatRequest, slot_id: int, inference: InferenceConfig) -> dict[str, Any]:
    """Everything in the body after the messages, in order."""
    body: dict[str, Any] = {
        "tools": [{"type": "function", "function": unstructure(tool)} for tool in request.tools],
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_progress": True,
        "cache_prompt": True,
        "id_slot": slot_id,
    }
    if request.thinking:
        body["reasoning_budget_tokens"] = inference.thinking_cap
    else:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    body.update(inference.sampling())
    if request.max_tokens is not None:  # this completion's own cap (an epoch's summary)
        body["max_tokens"] = request.max_tokens
    return body


def thinking_margin(thinking_cap: int) -> int:
    """How far past the cap reasoning may run before the client stops it itself."""
    return max(thinking_cap // 8, 64)


def backoff_ms(retry: int, inference: InferenceConfig, rng: random.Random) -> int:
    """The wait before retry number `retry` (1 for the first): exponential with full jitter.

    The envelope doubles from `backoff_initial_ms` up to `backoff_max_ms`; the wait is drawn
    uniformly below it, so many clients retrying at once spread out.
    """
    envelope = min(inference.backoff_max_ms, inference.backoff_initial_ms * 2 ** (retry - 1))
    return round(rng.uniform(0, envelope))
