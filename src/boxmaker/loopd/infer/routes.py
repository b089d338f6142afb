"""The server's small routes beside the completions, as functions of a `Client` or its httpx
client: `slot_state` (one slot's `GET /slots` entry) and `ask` (any route's status and JSON
answer, as the prompt cache's watch and saves ask `/props` and `/slots/<id>?action=`)."""

from __future__ import annotations

from typing import Any, Protocol

import httpx
import trio

from ...proto import DecodeError, parse_json
from ._http import read_small
from .errors import Http, InferError
from .props import slot_entry

__all__ = ["ask", "slot_state"]


async def slot_state(
    http: httpx.AsyncClient, slot_id: int, seconds: float
) -> dict[str, Any] | None:
    """The server's `GET /slots` entry for `slot_id`, or None (no answer within `seconds`,
    501 with `--no-slots`, odd JSON)."""
    with trio.move_on_after(seconds):
        try:
            status, text = await read_small(http, "GET", "/slots")
        except InferError:
            return None
        if status == 200:  # 501 when the server runs with --no-slots
            return slot_entry(text, slot_id)
    return None


class _Routes(Protocol):  # a `Client`
    async def call_json(self, method: str, path: str, body: Any = None) -> Any: ...


async def ask(client: _Routes, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request to a route with a small JSON answer (`/props`, `/slots/<id>?action=`),
    within the client's connect and idle timeouts: its status and its answer parsed (the
    text when an error's body is not JSON).

    Raises:
        InferError: the request failed or took longer, or a 200 answer is not JSON.
    """
    try:
        return 200, await client.call_json(method, path, body)
    except Http as error:
        try:
            return error.status, parse_json(error.body)
        except DecodeError:
            return error.status, error.body
