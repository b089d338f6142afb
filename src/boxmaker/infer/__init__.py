"""The inference path: the client for llama-server and the pure pieces it is made of."""

from .cache import CacheOutcome, Hit, Loss, cache_outcome
from .client import Client, OnEvent
from .errors import (
    Connect,
    Http,
    InferError,
    Protocol,
    Stream,
    Timeout,
    context_sizes,
    is_context_full,
    is_retryable,
)
from .request import backoff_ms, encode_request, request_body, thinking_margin
from .sse import END, NEED_DATA, SSEDecoder, SSEError
from .stream import ChunkFold

__all__ = [
    "END",
    "NEED_DATA",
    "CacheOutcome",
    "ChunkFold",
    "Client",
    "Connect",
    "Hit",
    "Http",
    "InferError",
    "Loss",
    "OnEvent",
    "Protocol",
    "SSEDecoder",
    "SSEError",
    "Stream",
    "Timeout",
    "backoff_ms",
    "cache_outcome",
    "context_sizes",
    "encode_request",
    "is_context_full",
    "is_retryable",
    "request_body",
    "thinking_margin",
]
