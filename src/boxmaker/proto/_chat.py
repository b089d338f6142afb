"""Chat values: messages, tool calls and schemas, the request, and what a completion returns.

These are what goes to llama-server and what comes back from it. A `ChatMessage` is exactly
its wire shape (the converter adds the `role`), so a message array can be compared as JSON
values and resent byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import field, frozen

from ._attach import ImagePart

__all__ = [
    "AssistantMessage",
    "ChatMessage",
    "ChatRequest",
    "Completion",
    "SystemMessage",
    "Timings",
    "ToolCall",
    "ToolMessage",
    "ToolSchema",
    "Usage",
    "UserMessage",
    "unfilled",
    "user_message_unstructure",
]


@frozen
class ToolCall:
    """One call the model asked for; `arguments` is the JSON text the model produced."""

    id: str
    name: str
    arguments: str


@frozen
class ToolSchema:
    """A tool as the model sees it; `parameters` is a JSON Schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


@frozen
class SystemMessage:
    content: str


@frozen
class UserMessage:
    """`images`: the message's images after its text (then its content goes as typed parts,
    OpenAI's shape: a text part, then an `image_url` part of each, a data URL)."""

    content: str
    images: tuple[ImagePart, ...] = field(default=(), metadata={"omit_if_default": True})


def user_message_unstructure(message: UserMessage) -> dict[str, Any]:
    """A user message as it travels: its text, or with images its typed parts (a text part,
    then an `image_url` part of each: a data URL of its bytes, or, for an image whose bytes
    are not filled in, one that names it by its hash, for sizing and comparing messages; a
    request never carries that one: `unfilled` says so first)."""
    if not message.images:
        return {"role": "user", "content": message.content}
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
    for image in message.images:
        said = f"base64,{image.data}" if image.data else f"sha256,{image.sha256}"
        parts.append({"type": "image_url", "image_url": {"url": f"data:{image.media_type};{said}"}})
    return {"role": "user", "content": parts}


def unfilled(messages: Sequence[ChatMessage]) -> str | None:
    """The hash of the first image of `messages` whose bytes are not filled in, if any."""
    for message in messages:
        if type(message) is UserMessage:
            for image in message.images:
                if not image.data:
                    return image.sha256
    return None


@frozen
class AssistantMessage:
    """An earlier completion as it is sent back: `content` is never null on the wire."""

    content: str
    reasoning_content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None


@frozen
class ToolMessage:
    tool_call_id: str
    content: str


ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@frozen
class ChatRequest:
    """One completion to ask for: `slot` is the logical slot name from `[slots]`;
    `max_tokens`, when set, caps this completion instead of `[inference] max_tokens`."""

    slot: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSchema, ...]
    thinking: bool = True
    max_tokens: int | None = None


@frozen
class Timings:
    """The server's figures for one completion (its `timings` object)."""

    cache_n: int
    prompt_n: int
    predicted_n: int
    prompt_ms: float
    predicted_ms: float


@frozen
class Completion:
    """A finished completion; the three message fields are `None` when the server sent none.

    `cache_block` is how exact `timings.cache_n` is: the server reuses its cache in blocks of
    that many tokens (1 for llama-server), or 0 when it reported no cache figure at all.
    """

    content: str | None
    reasoning_content: str | None
    tool_calls: tuple[ToolCall, ...] | None
    finish_reason: str
    timings: Timings
    reasoning_tokens: int
    thinking_capped: bool
    cache_block: int = 1


@frozen
class Usage:
    """What a `usage` record holds, less its time: the turn's answer carries it."""

    cache_n: int
    prompt_n: int
    predicted_n: int
    reasoning_tokens: int
    thinking_capped: bool
