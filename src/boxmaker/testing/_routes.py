"""The fake server's llama-server routes beside the completions: `/props`, `/slots` and its
save, restore and erase actions (`_slots`), `/tokenize`, `/apply-template` and
`/v1/chat/completions/input_tokens`, answered from the fake's state."""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any, Protocol

import trio

from ._answers import json_answer
from ._render import render, tokenize
from ._slots import slot_action
from ._wire import NOT_FOUND, error_body, props_body
from .transport import FakeResponse

__all__ = ["llama_route", "media_marker"]


class FakeLlamaServer(Protocol):  # what these routes read of the fake (`fake_server`)
    model: str
    n_ctx: int
    n_slots: int
    tool_calls: bool
    vision: bool
    slots_endpoint: bool
    slot_save_path: Path | None
    _slot_free: dict[int, trio.Semaphore]
    _slot_tokens: dict[int, list[str]]

    def slot_state(self, slot: int) -> dict[str, Any]: ...


def media_marker(seed: int, start: int) -> str:
    """A new `/props` marker per start, deterministic for a seed and drawn apart from the ids."""
    draw = random.Random(f"{seed}-{start}")
    return "<__media_" + "".join(draw.choices(string.ascii_letters + string.digits, k=32)) + "__>"


async def llama_route(
    fake: FakeLlamaServer, method: str, path: str, query: str, raw: Any, marker: str
) -> FakeResponse:
    """The answer of one of these routes (404 for another)."""
    if method == "GET" and path == "/props":
        body = props_body(
            fake.model, fake.n_ctx, fake.n_slots, fake.tool_calls, marker, vision=fake.vision
        )
        return json_answer(200, body)
    if method == "GET" and path == "/slots":
        if not fake.slots_endpoint:
            message = "This server does not support slots endpoint. Start it with `--slots`"
            return json_answer(501, error_body(501, message, "not_supported_error"))
        return json_answer(200, [fake.slot_state(slot) for slot in range(fake.n_slots)])
    if method == "POST" and path.startswith("/slots/"):
        return await _slot_action(fake, path.removeprefix("/slots/"), query, raw)
    if method == "POST" and path == "/tokenize":
        tokens = tokenize(str(raw.get("content", "")))
        return json_answer(200, {"tokens": [sum(t.encode()) % 49152 for t in tokens]})
    if method == "POST" and path == "/apply-template":
        return json_answer(200, {"prompt": "".join(render(raw))})
    if method == "POST" and path == "/v1/chat/completions/input_tokens":
        return json_answer(
            200, {"input_tokens": len(render(raw)), "object": "response.input_tokens"}
        )
    return json_answer(404, NOT_FOUND)


async def _slot_action(fake: FakeLlamaServer, slot_text: str, query: str, raw: Any) -> FakeResponse:
    action = dict(p.partition("=")[::2] for p in query.split("&") if p).get("action", "")
    slot = int(slot_text) % fake.n_slots if slot_text.lstrip("-").isdigit() else 0
    async with fake._slot_free[slot]:  # the server defers an action while the slot works
        status, body = slot_action(
            fake.slot_save_path, slot_text, action, raw, fake._slot_tokens, fake.n_slots, fake.n_ctx
        )
    return json_answer(status, body)
