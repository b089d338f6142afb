"""The inference path's errors: one tree, httpx's exceptions mapped once, at the edge.

    InferError
     ├── Http(status, body)         the server answered with a status other than 200
     ├── Stream(code, message, type) an error event in the middle of a stream
     ├── Connect(message)           could not connect to the server
     ├── Timeout(phase)             connect, first_byte, idle or completion
     └── ProtocolError(message, cut) bytes that are not the server's wire; `cut` when the
                                    connection ended before `[DONE]`

Nothing above `infer/` sees an httpx type. Messages never hold the API key: they are built
from statuses, bodies and socket errors, never from request headers.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from ...proto import DecodeError, parse_json

__all__ = [
    "Connect",
    "Http",
    "InferError",
    "ProtocolError",
    "Stream",
    "Timeout",
    "context_sizes",
    "is_context_full",
    "is_retryable",
]

Phase = Literal["connect", "first_byte", "idle", "completion"]


class InferError(Exception):
    """A completion could not be had; `str(error)` is one line a person can read."""


class Http(InferError):
    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self.body = body
        super().__init__(f"the server answered {status}: {_one_line(body)}")


class Stream(InferError):
    def __init__(self, code: int | None, message: str, type: str) -> None:
        self.code = code
        self.message = message
        self.type = type
        super().__init__(f"the server reported an error mid-stream ({type}): {message}")


class Connect(InferError):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"cannot connect to the server: {message}")


class Timeout(InferError):
    _WHAT: ClassVar[dict[str, str]] = {
        "connect": "no connection",
        "first_byte": "no response headers",
        "idle": "no data in the stream",
        "completion": "the completion did not end",
    }

    def __init__(self, phase: Phase, seconds: float) -> None:
        self.phase = phase
        self.seconds = seconds
        super().__init__(f"timed out ({phase}): {self._WHAT[phase]} within {seconds:g} s")


class ProtocolError(InferError):
    def __init__(self, message: str, *, cut: bool = False) -> None:
        self.message = message
        self.cut = cut
        super().__init__(message)


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def is_retryable(error: InferError) -> bool:
    """True for failures that may pass: no connection, a cut stream, a timeout, a 503.

    Never a 4xx, a 500 or 501 (the server answers 500 for malformed requests), nor an error
    event in the stream, nor a completion that ran past its wall-clock cap (asked again, it
    would run as long).
    """
    match error:
        case Timeout(phase="completion"):
            return False
        case Connect() | Timeout():
            return True
        case Http(status=503):
            return True
        case ProtocolError(cut=True):
            return True
    return False


def is_context_full(error: InferError) -> bool:
    """The 400 a server sends when the prompt does not fit its context: llama-server's
    `exceed_context_size_error`, or vLLM's, whose words change between versions (its
    `param` is `input_tokens`, or the message speaks of the context length)."""
    return _context_full(error) is not None


def context_sizes(error: InferError) -> tuple[int, int] | None:
    """The prompt's tokens and the slot's context (`n_prompt_tokens`, `n_ctx`) that the
    context-full 400 names, or None when it is not that answer or does not say."""
    detail = _context_full(error)
    if detail is None:
        return None
    prompt, n_ctx = detail.get("n_prompt_tokens"), detail.get("n_ctx")
    if type(prompt) is not int or type(n_ctx) is not int or n_ctx <= 0:
        return None
    return prompt, n_ctx


def _context_full(error: InferError) -> dict[str, object] | None:
    if not isinstance(error, Http) or error.status != 400:
        return None
    try:
        body = parse_json(error.body)
    except DecodeError:
        return None
    detail = body.get("error") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        return None
    if detail.get("type") == "exceed_context_size_error" or detail.get("param") == "input_tokens":
        return detail
    message = str(detail.get("message", "")).casefold()
    return detail if "context length" in message and "token" in message else None
