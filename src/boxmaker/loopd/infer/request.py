"""What the client sends and when it retries: the request body and the backoff. Pure.

The body is SPEC section 4's: the messages and tools of the `ChatRequest` (no `tools` at all
when there are none, as in a fenced session), streaming with usage and progress,
`cache_prompt`, the pinned `id_slot` (none for a tier's request that names no slot), the
thinking budget (or thinking off), and the configured sampling keys as they are (a request's
own `max_tokens` over the config's). The
`Dialect` trims it: an OpenAI-style server (`kind = "openai"`: vLLM, SGLang, Ollama) gets none
of llama-server's own fields, and a model whose profile says it does not reason gets no
thinking fields.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
from attrs import frozen

from ...config import InferenceConfig
from ...profiles import Profile
from ...proto import ChatRequest, encode, encode_chat_body, unfilled, unstructure

__all__ = [
    "LLAMA",
    "Dialect",
    "backoff_ms",
    "encode_request",
    "output_tokens",
    "profile_sampling",
    "request_body",
    "thinking_margin",
]


@frozen
class Dialect:
    """How much of the body a server takes: `llama` for llama-server's own fields (`id_slot`,
    `cache_prompt`, `return_progress`, the reasoning budget); `thinking` for a model that
    reasons (else no thinking field is sent at all); `model`, `[server] model`, sent as the
    body's `model` when set (an OpenAI-style server that serves several, Ollama, needs it)."""

    llama: bool = True
    thinking: bool = True
    model: str = ""


LLAMA = Dialect()


def request_body(
    request: ChatRequest, slot_id: int | None, inference: InferenceConfig, dialect: Dialect = LLAMA
) -> dict[str, Any]:
    """The JSON body of `POST /v1/chat/completions` for `request` on server slot `slot_id`."""
    _filled(request)
    messages = [unstructure(message) for message in request.messages]
    return {"messages": messages, **_settings(request, slot_id, inference, dialect)}


def encode_request(
    request: ChatRequest, slot_id: int | None, inference: InferenceConfig, dialect: Dialect = LLAMA
) -> bytes:
    """`encode(request_body(...))`, the same bytes, by the hand-written path. Everything after
    the messages (the tools' schemas most of it) is the same for every request of a session:
    its bytes are kept (`_tail`), so a request costs its messages' encoding alone."""
    _filled(request)
    return encode_chat_body(request.messages, _tail(request, slot_id, inference, dialect))


def _filled(request: ChatRequest) -> None:
    """Raises `ValueError` for a request with an image whose bytes were not filled in
    (`OpenSession.request_messages` fills them): loopd's bug, never sent as a name."""
    if (image := unfilled(request.messages)) is not None:
        raise ValueError(f"image {image} of a request has no bytes filled in")


_TAILS: dict[tuple[object, ...], tuple[object, object, bytes]] = {}
_MAX_TAILS = 256


def _tail(
    request: ChatRequest, slot_id: int | None, inference: InferenceConfig, dialect: Dialect
) -> bytes:
    """`encode(_settings(...))`, kept by the identity of the request's tools and settings
    (the cached entry holds both objects, so their ids cannot be reused while it stands)."""
    key = (id(request.tools), id(inference), slot_id, request.thinking, request.max_tokens, dialect)
    hit = _TAILS.get(key)
    if hit is not None and hit[0] is request.tools and hit[1] is inference:
        return hit[2]
    tail = encode(_settings(request, slot_id, inference, dialect))
    if len(_TAILS) >= _MAX_TAILS:
        _TAILS.clear()
    _TAILS[key] = (request.tools, inference, tail)
    return tail


def _settings(
    request: ChatRequest, slot_id: int | None, inference: InferenceConfig, dialect: Dialect
) -> dict[str, Any]:
    """Everything in the body after the messages, in order."""
    body: dict[str, Any] = {"model": dialect.model} if dialect.model else {}
    if request.tools:
        body["tools"] = [{"type": "function", "function": unstructure(t)} for t in request.tools]
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if dialect.llama:
        body.update(return_progress=True, cache_prompt=True)
        if slot_id is not None:  # none: a tier's request with no slot of its own
            body["id_slot"] = slot_id
    if dialect.thinking and request.thinking and dialect.llama:
        body["reasoning_budget_tokens"] = inference.thinking_cap
    elif dialect.thinking and not request.thinking:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    body.update(inference.sampling())
    if request.max_tokens is not None:  # this completion's own cap (an epoch's summary)
        body["max_tokens"] = request.max_tokens
    return body


def output_tokens(setting: int, output_cap: int | None, context: int | None, llama: bool) -> int:
    """The `max_tokens` every request sends: `[inference] max_tokens`, at most the profile's
    `output_cap`, and on an OpenAI-style server of known context at most a quarter of it
    (vLLM refuses a request whose prompt and `max_tokens` together pass the context, where
    llama-server stops at the context's end; the prompt keeps the other three quarters)."""
    caps = [setting, output_cap, None if llama or context is None else max(context // 4, 1)]
    return min(cap for cap in caps if cap is not None)


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


def profile_sampling(
    inference: InferenceConfig, profile: Profile, *, llama: bool
) -> dict[str, float | int]:
    """The profile's sampling for the keys `[inference]` leaves unset, each of its config
    type; an OpenAI-style server gets temperature and top_p only (the rest are named other
    ways, or not taken)."""
    types = {f.name: f.type for f in attrs.fields(InferenceConfig)}
    taken: dict[str, float | int] = {}
    for key, value in profile.sampling.items():
        if getattr(inference, key) is None and (llama or key in ("temperature", "top_p")):
            taken[key] = int(value) if str(types[key]).startswith("int") else value
    return taken
