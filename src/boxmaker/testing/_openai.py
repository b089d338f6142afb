"""An OpenAI-style server's bytes, as vLLM writes them: the fake server's `openai` mode. Pure.

Shapes from vLLM's documented OpenAI-compatible server (docs.vllm.ai: "OpenAI-Compatible
Server", "Reasoning Outputs") and its protocol classes, as `/tmp/notes/server-facts.md` §6.1
and docs/decisions.md record them:

- every chunk is `{"id", "object", "created", "model", "choices": [{"index", "delta",
  "logprobs": null, "finish_reason"}]}`; the first delta is `{"role": "assistant",
  "content": ""}` (an empty string, where llama-server sends null);
- reasoning streams as `delta.reasoning` (the name `reasoning_content` was retired);
- a tool call's first delta carries its id (`chatcmpl-tool-<hex>`), type and name, and each
  later one an `arguments` fragment;
- the finish chunk adds `"stop_reason": null`; with `stream_options.include_usage` a last
  chunk with `"choices": []` carries `usage`, with `prompt_tokens_details.cached_tokens` only
  when the server runs with `--enable-prompt-tokens-details`, and
  `completion_tokens_details.reasoning_tokens` only with a reasoning parser;
- no `prompt_progress`, no `timings`; an error mid-stream is `data: {"error": ...}` and then
  `data: [DONE]`; a prompt over the context is a 400 `BadRequestError` with
  `"param": "input_tokens"`; `/health` is 200 with an empty body; no `/slots`, `/props` or
  `/tokenize` (FastAPI's 404 `{"detail": "Not Found"}`).
"""

from __future__ import annotations

from typing import Any

from ..proto import encode

__all__ = [
    "NOT_FOUND",
    "OpenAIChunkWriter",
    "context_full_body",
    "json_headers",
    "models_body",
    "sse_headers",
]

NOT_FOUND = b'{"detail":"Not Found"}'


def _event(obj: Any) -> bytes:
    return b"data: " + encode(obj) + b"\n\n"


class OpenAIChunkWriter:
    """The `data:` events of one streamed completion, as vLLM sends them; the same methods
    as the llama-server `ChunkWriter`, so the fake streams either from one script."""

    def __init__(self, completion_id: str, model: str, created: int, *, details: bool) -> None:
        head = {"id": completion_id, "object": "chat.completion.chunk", "created": created}
        self._head = {**head, "model": model}
        self._details = details  # --enable-prompt-tokens-details

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice: dict[str, Any] = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        if finish_reason is not None:
            choice["stop_reason"] = None
        return _event({**self._head, "choices": [choice]})

    def role(self) -> bytes:
        return self.chunk({"role": "assistant", "content": ""})

    def progress(self, total: int, cache: int, processed: int, time_ms: int) -> bytes:
        return b""  # vLLM says nothing while it processes the prompt

    def content(self, text: str) -> bytes:
        return self.chunk({"content": text})

    def reasoning(self, text: str) -> bytes:
        return self.chunk({"reasoning": text})

    def tool_call(self, index: int, call_id: str, name: str, arguments: str | None) -> bytes:
        function = {"name": name}
        first = {"id": f"chatcmpl-tool-{call_id}", "type": "function", "index": index}
        event = self.chunk({"tool_calls": [{**first, "function": function}]})
        return event + (self.tool_arguments(index, arguments) if arguments else b"")

    def tool_arguments(self, index: int, arguments: str) -> bytes:
        return self.chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})

    def finish(self, reason: str) -> bytes:
        return self.chunk({}, finish_reason=reason)

    def usage(
        self,
        *,
        cache_n: int,
        prompt_n: int,
        predicted_n: int,
        prompt_ms: float,
        predicted_ms: float,
        reasoning_n: int = 0,
    ) -> bytes:
        usage: dict[str, Any] = {
            "prompt_tokens": cache_n + prompt_n,
            "total_tokens": cache_n + prompt_n + predicted_n,
            "completion_tokens": predicted_n,
        }
        if reasoning_n:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_n}
        if self._details:
            usage["prompt_tokens_details"] = {"cached_tokens": cache_n}
        return _event({**self._head, "choices": [], "usage": usage})

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"

    @staticmethod
    def error(code: int, message: str, type: str) -> bytes:
        detail = {"message": message, "type": type, "param": None, "code": code}
        return _event({"error": detail}) + b"data: [DONE]\n\n"


def context_full_body(prompt: int, wanted: int, n_ctx: int) -> bytes:
    """vLLM's 400 for a prompt and output that do not fit the model's context length."""
    message = (
        f"You passed {prompt} input tokens and requested {wanted} output tokens. However, the "
        f"model's context length is only {n_ctx} tokens, resulting in a maximum input length "
        f"of {max(n_ctx - wanted, 0)} tokens. Please reduce the length of the input prompt."
    )
    detail = {"message": message, "type": "BadRequestError", "param": "input_tokens", "code": 400}
    return encode({"error": detail})


def models_body(model: str, n_ctx: int, created: int, others: tuple[str, ...] = ()) -> bytes:
    """`GET /v1/models`: the model served, with its `max_model_len`, after `others` listed
    as Ollama lists the models pulled (no context length)."""
    permission = {
        "id": "modelperm-0",
        "object": "model_permission",
        "created": created,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }
    card = {
        "id": model,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": model,
        "parent": None,
        "max_model_len": n_ctx,
        "permission": [permission],
    }
    listed = [{"id": o, "object": "model", "created": created, "owned_by": "library"}
              for o in others]  # fmt: skip
    return encode({"object": "list", "data": [*listed, card]})


def json_headers(length: int) -> list[tuple[str, str]]:
    return [
        ("date", "Tue, 01 Dec 2026 05:00:00 GMT"),
        ("server", "uvicorn"),
        ("content-length", str(length)),
        ("content-type", "application/json"),
    ]


def sse_headers() -> list[tuple[str, str]]:
    return [
        ("date", "Tue, 01 Dec 2026 05:00:00 GMT"),
        ("server", "uvicorn"),
        ("content-type", "text/event-stream; charset=utf-8"),
        ("transfer-encoding", "chunked"),
    ]
