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
from .request import LLAMA, Dialect, backoff_ms, encode_request, request_body, thinking_margin
from .servers import Servers, baseline_tokens, server_facts
from .sse import END, NEED_DATA, SSEDecoder, SSEError
from .stream import ChunkFold
from .thinking import ThinkingWatch, tokenizer_count

__all__ = [
    "END",
    "LLAMA",
    "NEED_DATA",
    "CacheOutcome",
    "ChunkFold",
    "Client",
    "Connect",
    "Dialect",
    "Hit",
    "Http",
    "InferError",
    "Loss",
    "OnEvent",
    "Protocol",
    "SSEDecoder",
    "SSEError",
    "Servers",
    "Stream",
    "ThinkingWatch",
    "Timeout",
    "backoff_ms",
    "baseline_tokens",
    "cache_outcome",
    "context_sizes",
    "encode_request",
    "is_context_full",
    "is_retryable",
    "request_body",
    "server_facts",
    "thinking_margin",
    "tokenizer_count",
]
