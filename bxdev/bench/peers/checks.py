"""What the peers row reads from the requests it recorded. Pure.

A request *extends* the one before when the earlier body, up to the end of its last message,
is a byte prefix of the later one: the later request holds every earlier message exactly as it
was sent, in the same place, with the same bytes, and adds messages after them. That is what
lets the server keep the prompt it holds (a rendered prompt can only be a prefix of the next
if the messages are). Where a request breaks it, `link` names the first message and the byte
offset where the two differ.

The server's own figures come with each answer (`timings`): `cache_n` prompt tokens taken
from the slot's cache, `prompt_n` processed, `predicted_n` generated. The slot holds the last
prompt and what was generated after it (less the last token, sampled but never evaluated), so
of a request's prompt only `cache_n + prompt_n - held` tokens are new; the rest of `prompt_n`
is processed again.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import frozen

__all__ = [
    "Exchange",
    "Link",
    "Reuse",
    "again",
    "exchange_of",
    "first_difference",
    "link",
    "links",
    "messages_end",
    "sent_keys",
]


@frozen
class Reuse:
    """The server's figures for one request."""

    cache_n: int
    prompt_n: int
    predicted_n: int

    @property
    def ratio(self) -> float:
        """The part of the prompt taken from the cache: cache_n / (cache_n + prompt_n)."""
        return self.cache_n / (self.cache_n + self.prompt_n)


@frozen
class Exchange:
    """One chat request as the proxy recorded it: the body as sent and the answer streamed."""

    body: str
    answer: str
    reuse: Reuse | None
    server_s: float | None = None  # the server's own prompt and generation time
    reasoning: str = ""  # streamed before the answer, if the model reasoned


def exchange_of(record: Mapping[str, Any]) -> Exchange:
    """An `Exchange` from a line of the proxy's log."""
    timings = record.get("timings") or {}
    reuse = None
    if all(isinstance(timings.get(k), int) for k in ("cache_n", "prompt_n", "predicted_n")):
        reuse = Reuse(timings["cache_n"], timings["prompt_n"], timings["predicted_n"])
    server_s = None
    if all(isinstance(timings.get(k), int | float) for k in ("prompt_ms", "predicted_ms")):
        server_s = (timings["prompt_ms"] + timings["predicted_ms"]) / 1000
    answer, reasoning = str(record.get("answer", "")), str(record.get("reasoning", ""))
    return Exchange(str(record["body"]), answer, reuse, server_s, reasoning)


@frozen
class Link:
    """Request `number` against the one before it."""

    number: int
    extends: bool  # the earlier body up to the end of its messages is a byte prefix
    added: int  # messages added
    echoed: bool  # the first message added is the earlier answer, as streamed
    breaks: str | None  # where it breaks, in words
    reasoning_back: bool = False  # and it carries the earlier reasoning, as streamed


def messages_end(body: str) -> int:
    """The offset just past the last message of the body's top-level `messages` array.

    Raises:
        ValueError: the body has no `messages` array.
    """
    value = json.loads(body).get("messages")
    if not isinstance(value, list):
        raise ValueError("the body has no messages array")
    decoder = json.JSONDecoder()
    at = 0
    while (at := body.find('"messages"', at)) >= 0:
        start = body.index(":", at + len('"messages"')) + 1
        while body[start] in " \t\r\n":
            start += 1
        try:
            found, end = decoder.raw_decode(body, start)
        except ValueError:
            found = None
        if found == value:
            close = end - 1  # the ']'
            while body[close - 1] in " \t\r\n":
                close -= 1
            return close
        at += 1
    raise ValueError("the body has no messages array")


def first_difference(a: Any, b: Any, path: str = "messages") -> str | None:
    """Where two JSON values first differ, as a path (`messages[2].content`), or None."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} became {type(b).__name__}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} became {list(b)}"
        for key in a:
            if (found := first_difference(a[key], b[key], f"{path}.{key}")) is not None:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if (found := first_difference(x, y, f"{path}[{i}]")) is not None:
                return found
        return None if len(a) <= len(b) else f"{path}: {len(a)} messages became {len(b)}"
    if a == b:
        return None
    return f"{path}: {json.dumps(a)[:40]} became {json.dumps(b)[:40]}"


def link(before: Exchange, after: Exchange, number: int) -> Link:
    """Does request `number` (`after`) extend the one before it, and where does it break?"""
    old, new = json.loads(before.body)["messages"], json.loads(after.body)["messages"]
    cut = messages_end(before.body)
    extends = after.body.startswith(before.body[:cut])
    added = new[len(old) :] if new[: len(old)] == old else []
    echoed = bool(added) and added[0].get("role") == "assistant"
    echoed = echoed and added[0].get("content") == before.answer
    reasoning_back = echoed and bool(before.reasoning)
    reasoning_back = reasoning_back and added[0].get("reasoning_content") == before.reasoning
    breaks = None
    if not extends:
        where = first_difference(old, new[: len(old)]) or "the same messages in other bytes"
        breaks = f"{where} (byte {_offset(before.body[:cut], after.body):,})"
    return Link(number, extends, len(new) - len(old), echoed, breaks, reasoning_back)


def _offset(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))


def links(exchanges: Sequence[Exchange]) -> list[Link]:
    """Every request after the first against the one before it (numbered from 2)."""
    return [link(a, b, n) for n, (a, b) in enumerate(itertools.pairwise(exchanges), 2)]


def again(reuses: Sequence[Reuse]) -> list[int]:
    """Per request after the first: the prompt tokens processed beyond the new ones (0 when
    the server kept all it held; a token or two where text tokenizes anew at a boundary)."""
    out = []
    for before, after in itertools.pairwise(reuses):
        held = before.cache_n + before.prompt_n + before.predicted_n - 1
        new = after.cache_n + after.prompt_n - held
        out.append(after.prompt_n - max(new, 0))
    return out


def sent_keys(bodies: Sequence[str]) -> dict[str, list[str]]:
    """The keys each body holds besides `messages`, with every value seen (as JSON)."""
    keys: dict[str, list[str]] = {}
    for body in bodies:
        for key, value in json.loads(body).items():
            if key != "messages":
                seen = keys.setdefault(key, [])
                if (shown := json.dumps(value, sort_keys=True)) not in seen:
                    seen.append(shown)
    return keys
