"""The fake server's whole answers (not streams): JSON bodies with their status and headers,
the context-full 400 of either kind of server, an OpenAI-style server's own routes, and a
recorded event stream cut into the chunks the server flushed. Pure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Any

from ..proto import encode
from . import _openai as openai
from ._wire import error_body, json_headers
from .transport import FakeResponse

__all__ = ["context_full", "json_answer", "openai_route", "over_context", "sse_parts"]


def json_answer(status: int, obj: Any) -> FakeResponse:
    """A JSON answer as llama-server sends it (an error closes the connection)."""
    body = obj if isinstance(obj, bytes) else encode(obj)
    reason = HTTPStatus(status).phrase
    return FakeResponse(status, reason, json_headers(len(body), close=status >= 400), body)


def over_context(kind: str, prompt: int, n_ctx: int, body: dict[str, Any]) -> bool:
    """llama-server refuses a prompt of the whole context or more; vLLM one whose prompt and
    requested output together are over it."""
    if kind == "openai":
        wanted = body.get("max_tokens")
        return prompt + (wanted if isinstance(wanted, int) else 0) > n_ctx
    return prompt >= n_ctx


def context_full(kind: str, prompt: int, n_ctx: int, body: dict[str, Any]) -> FakeResponse:
    """The 400 for a prompt over the context, in the words of each kind of server."""
    if kind == "openai":
        wanted = body.get("max_tokens")
        wanted = wanted if isinstance(wanted, int) else max(n_ctx - prompt, 1)
        answer = openai.context_full_body(prompt, wanted, n_ctx)
        return FakeResponse(400, "Bad Request", openai.json_headers(len(answer)), answer)
    message = (
        f"request ({prompt} tokens) exceeds the available context size "
        f"({n_ctx} tokens), try increasing it"
    )
    extra = {"n_prompt_tokens": prompt, "n_ctx": n_ctx}
    return json_answer(400, error_body(400, message, "exceed_context_size_error", **extra))


def openai_route(
    method: str, path: str, model: str, n_ctx: int, *, health: bool = True,
    others: tuple[str, ...] = (),
) -> FakeResponse:  # fmt: skip
    """An OpenAI-style server's routes besides completions: `/health` (unless `health` is
    False, as on Ollama) and `/v1/models` (`others` listed before `model`)."""
    if method == "GET" and path == "/health" and health:
        return FakeResponse(200, "OK", openai.json_headers(0), b"")
    if method == "GET" and path == "/v1/models":
        body = openai.models_body(model, n_ctx, 1795990732, others)
        return FakeResponse(200, "OK", openai.json_headers(len(body)), body)
    return FakeResponse(404, "Not Found", openai.json_headers(22), openai.NOT_FOUND)


async def sse_parts(body: bytes) -> AsyncIterator[bytes | object]:
    """A recorded event stream, one event per chunk as the server flushes them."""
    start = 0
    while (end := body.find(b"\n\n", start)) >= 0:
        yield body[start : end + 2]
        start = end + 2
    if start < len(body):
        yield body[start:]
