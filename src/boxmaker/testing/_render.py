"""The fake server's model of a chat template and a tokenizer. Pure.

`render(body)` turns a request body into a token-like sequence the way a ChatML-style
template would (system, tools, then each message between role markers, then the generation
prompt); `assistant_tokens(...)` are the tokens a completion adds to the slot, which are
exactly what `render` gives for that message when it is sent back (without its end marker,
which the real server never keeps in the KV cache). So the longest common prefix of a slot's
tokens and a new prompt behaves as the real server's cache does: every earlier byte that is
sent back unchanged is reused; a change anywhere before the end recomputes from there on.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

__all__ = ["assistant_tokens", "common_prefix", "generation_prompt", "render", "tokenize"]

_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")

END = "<|end|>"


def tokenize(text: str) -> list[str]:
    """Words and single punctuation marks, each with the white space before it."""
    return _TOKEN.findall(text)


def _calls(calls: Any) -> list[str]:
    tokens: list[str] = []
    for call in calls or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        tokens += ["<tool_call>", str(call.get("id", "")) if isinstance(call, dict) else ""]
        tokens += tokenize(str(function.get("name", "")))
        arguments = function.get("arguments", "")
        tokens += tokenize(arguments if isinstance(arguments, str) else json.dumps(arguments))
        tokens.append("</tool_call>")
    return tokens


def assistant_tokens(content: str | None, reasoning: str | None, calls: Any) -> list[str]:
    """The tokens of an assistant message after its role marker, without the end marker."""
    tokens: list[str] = []
    if reasoning:
        tokens += ["<think>", *tokenize(reasoning), "</think>"]
    return tokens + tokenize(content or "") + _calls(calls)


def generation_prompt(thinking: bool) -> list[str]:
    """Thinking off renders an empty think block, as Qwen3-style templates do."""
    return ["<|assistant|>"] if thinking else ["<|assistant|>", "<think>", "</think>"]


def _text(content: Any) -> str:
    if isinstance(content, list):  # typed content parts; an image, as its media marker
        return "".join(_part(p) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _part(part: dict[str, Any]) -> str:
    if part.get("type") == "image_url":
        url = str((part.get("image_url") or {}).get("url", ""))
        return f" <__image__ {hashlib.sha256(url.encode()).hexdigest()[:16]}> "
    return str(part.get("text", ""))


def has_image(body: dict[str, Any]) -> bool:
    """Whether a request's messages carry an image part."""
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in body.get("messages") or []
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for part in message["content"]
    )


def render(body: dict[str, Any]) -> list[str]:
    """The prompt tokens of a chat request body, generation prompt included."""
    tokens: list[str] = []
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    for index, message in enumerate(messages):
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        tokens.append(f"<|{role}|>")
        if role == "assistant":
            reasoning = message.get("reasoning_content")
            tokens += assistant_tokens(
                _text(message.get("content")), reasoning, message.get("tool_calls")
            )
        elif role == "tool":
            tokens += [
                str(message.get("tool_call_id", "")),
                *tokenize(_text(message.get("content"))),
            ]
        else:
            tokens += tokenize(_text(message.get("content")))
        tokens.append(END)
        if index == 0 and role == "system" and tools:
            tokens += ["<tools>", *tokenize(json.dumps(tools, separators=(",", ":"))), "</tools>"]
    kwargs = body.get("chat_template_kwargs") or {}
    return tokens + generation_prompt(kwargs.get("enable_thinking", True) is not False)


def common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
