"""The inference path: the client for llama-server and the pure pieces it is made of."""

from .client import Client, HeldSlot, OnEvent
from .errors import (
    Connect,
    Http,
    InferError,
    ProtocolError,
    Stream,
    Timeout,
    context_sizes,
    is_context_full,
    is_retryable,
)
from .props import ServerIdentity, identity_of, settings_warnings, slot_entry
from .request import LLAMA, Dialect, backoff_ms, encode_request, request_body, thinking_margin
from .routes import ask, slot_state
from .servers import Servers, baseline_tokens, server_facts, takes_images
from .sse import END, NEED_DATA, SSEDecoder, SSEError
from .stream import ChunkFold
from .thinking import ThinkingWatch, tokenizer_count

__all__ = [
    "END",
    "LLAMA",
    "NEED_DATA",
    "ChunkFold",
    "Client",
    "Connect",
    "Dialect",
    "HeldSlot",
    "Http",
    "InferError",
    "OnEvent",
    "ProtocolError",
    "SSEDecoder",
    "SSEError",
    "ServerIdentity",
    "Servers",
    "Stream",
    "ThinkingWatch",
    "Timeout",
    "ask",
    "backoff_ms",
    "baseline_tokens",
    "context_sizes",
    "encode_request",
    "identity_of",
    "is_context_full",
    "is_retryable",
    "request_body",
    "server_facts",
    "settings_warnings",
    "slot_entry",
    "slot_state",
    "takes_images",
    "thinking_margin",
    "tokenizer_count",
]
