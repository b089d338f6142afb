"""A fake llama-server that behaves like the real one on the wire.

Two modes. **Scripted**: a test gives `Reply`s (content, reasoning, tool calls) and `Fault`s,
one per chat request in order, and the fake streams each in the server's exact chunk format
(`_wire`), with a per-slot prompt cache modelled by `_render`. **Replay**: it answers each
request with the next recorded exchange for its method and path (or the next one at all).

It serves `/v1/chat/completions`, `/health` and the routes of `_routes` (`/props`, `/slots`
and its actions, ...), keeps every request body per slot, and counts streams the client closed
early. It runs in process as an `httpx.MockTransport` (deterministic, works with trio's
autojump clock) or on a TCP port (`_tcp`, or `python -m boxmaker.testing`).

With `kind="openai"` it answers as vLLM does (`_openai`): its chunks, `usage` for `timings`,
`/v1/models`, an empty `/health`, none of llama-server's own routes or fields, and one prompt
cache for every request, reused in whole blocks (`cache_block` tokens) as vLLM's is. With
`ollama=True` as well, it differs where Ollama's documented behaviour does: no `/health` (404)
and a completion without `model` refused (400).
"""

from __future__ import annotations

import contextlib
import random
import string
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import trio
from attrs import define, field

from ..proto import DecodeError, parse_json
from . import _openai as openai
from ._answers import context_full, json_answer, openai_route, over_context, sse_parts
from ._completion import Fault, FaultKind, Reply, Sent, Timing, completion_parts
from ._mock import mock_transport
from ._render import common_prefix, has_image, render
from ._routes import llama_route, media_marker
from ._tcp import serve_tcp
from ._wire import BAD_KEY, LOADING, STATUS_ERRORS, ChunkWriter, error_body, sse_headers
from .recording import Exchange
from .transport import CUT, Connected, FakeResponse, Refused

__all__ = ["FakeLlamaServer", "Fault", "FaultKind", "Reply", "Timing"]


@define
class FakeLlamaServer:
    """The fake. Give `script` (scripted mode) or `exchanges` (replay mode)."""

    script: Iterable[Reply | Fault] = ()
    exchanges: Iterable[Exchange] | None = None
    default: Reply | None = None  # streamed when the script is empty; else a 500 that says so
    # Asked first with each chat request's body: a reply made from what was asked (a summary
    # written from the conversation), or None for the script's next item.
    responder: Callable[[dict[str, Any]], Reply | None] | None = None
    n_slots: int = 1
    n_ctx: int = 4096
    timing: Timing = field(factory=Timing)  # batch size, token times, the budget enforced
    model: str = "fake.gguf"  # /props' model_alias; `auto` matches profiles on it
    tool_calls: bool = True  # /props: whether the chat template makes tool calls
    vision: bool = False  # /props modalities: it takes images (a vision model, its --mmproj)
    kind: Literal["llama-server", "openai"] = "llama-server"
    cached_tokens: bool = True  # openai: usage says cached_tokens (--enable-prompt-tokens-details)
    cache_block: int = 16  # openai: the prefix cache reuses whole blocks of this many tokens
    ollama: bool = False  # openai: no /health, and a completion must name its `model`
    also_listed: tuple[str, ...] = ()  # openai: more models /v1/models lists, before `model`
    seed: int = 0
    loading: bool = False  # every route answers 503, as while the model loads
    api_key: str | None = None  # when set, requests without it get 401 (not /health)
    slots_endpoint: bool = True  # False: `/slots` answers 501, as with --no-slots
    slot_save_path: Path | None = None  # --slot-save-path: where slot actions keep their files
    requests: dict[int, list[dict[str, Any]]] = field(factory=dict)  # bodies, per slot
    statuses: dict[int, list[int]] = field(factory=dict)  # the status each request got
    received: list[tuple[str, str, dict[str, str]]] = field(factory=list)  # method, path, headers
    disconnects: int = 0  # streams the client closed before their end
    completed: int = 0  # streams sent to their [DONE]
    _queue: deque[Reply | Fault] = field(init=False)
    _replay: deque[Exchange] | None = field(init=False)
    _rng: random.Random = field(init=False)
    _slot_tokens: dict[int, list[str]] = field(init=False, factory=dict)
    _prefixes: list[list[str]] = field(init=False, factory=list)  # openai: every one cached
    _slot_free: dict[int, trio.Semaphore] = field(init=False, factory=dict)
    _held: dict[int, trio.Event] = field(init=False, factory=dict)
    _streaming: set[int] = field(init=False, factory=set)
    _count: int = field(init=False, default=0)
    _marker: str = field(init=False, default="")
    _starts: int = field(init=False, default=0)
    _disconnected: trio.Event = field(init=False, factory=trio.Event)

    def __attrs_post_init__(self) -> None:
        self._queue = deque(self.script)
        self._replay = deque(self.exchanges) if self.exchanges is not None else None
        self._rng = random.Random(self.seed)
        self._slot_free = {slot: trio.Semaphore(1) for slot in range(self.n_slots)}
        self._starts += 1
        self._marker = media_marker(self.seed, self._starts)

    # --- what tests drive -------------------------------------------------------------------

    def add(self, *items: Reply | Fault) -> None:
        """Append to the script."""
        self._queue.extend(items)

    def hold(self, slot: int = 0) -> None:
        """Another client's task occupies `slot`: `/slots` says so and requests wait."""
        self._held.setdefault(slot, trio.Event())

    def release(self, slot: int = 0) -> None:
        if (event := self._held.pop(slot, None)) is not None:
            event.set()

    def note_disconnect(self) -> None:
        """A client left before the end of its response (the transports call this)."""
        self.disconnects += 1
        self._disconnected.set()
        self._disconnected = trio.Event()

    async def wait_for_disconnects(self, count: int) -> None:
        """Return once `count` clients have left early (over TCP the fake notices at once)."""
        while self.disconnects < count:
            await self._disconnected.wait()

    def forget(self, slot: int = 0) -> None:
        """Empty the slot's cache, as a restart or another client's prompt would."""
        self._slot_tokens.pop(slot, None)

    def restart(self) -> None:
        """Stop and start again: every slot's cache is empty and `/props` names a new process
        (its `media_marker`, drawn at random by each server process)."""
        self._slot_tokens.clear()
        self._starts += 1
        self._marker = media_marker(self.seed, self._starts)

    def slot_tokens(self, slot: int = 0) -> list[str]:
        """What the slot's cache holds: the last prompt and the tokens generated after it."""
        return list(self._slot_tokens.get(slot, []))

    def mock_transport(self) -> Any:
        """This fake as an in-process `httpx.MockTransport`."""
        return mock_transport(self)

    async def serve_tcp(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve on a real TCP port forever; `task_status.started(port)` once listening."""
        await serve_tcp(self, host=host, port=port, task_status=task_status)

    # --- serving ----------------------------------------------------------------------------

    async def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes, connected: Connected
    ) -> FakeResponse:
        """Answer one HTTP request (`path` may carry a query). Raises `Refused` for a refused
        connection."""
        path, _, query = path.partition("?")
        self.received.append((method, path, headers))
        if self._replay is not None:
            await connected()
            if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
                with contextlib.suppress(DecodeError):  # kept as the scripted mode keeps them
                    self.requests.setdefault(self._slot_of(body), []).append(parse_json(body))
                await self._wait_while_held(body)
            if (method, path) == ("GET", "/slots") and not self._recorded(method, path):
                return json_answer(200, [self.slot_state(slot) for slot in range(self.n_slots)])
            return self._replayed(method, path)
        if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            return await self._completion(body, headers, connected)
        await connected()
        if self.kind == "openai":
            return openai_route(method, path, self.model, self.n_ctx, health=not self.ollama,
                                others=self.also_listed)  # fmt: skip
        if self.loading:
            return json_answer(503, LOADING)
        if method == "GET" and path in ("/health", "/v1/health"):
            return json_answer(200, {"status": "ok"})
        if not self._authorized(headers):
            return json_answer(401, BAD_KEY)
        raw = parse_json(body) if body else {}
        return await llama_route(self, method, path, query, raw, self._marker)

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self.api_key is None:
            return True
        given = headers.get("authorization", headers.get("x-api-key", ""))
        return given.removeprefix("Bearer ") == self.api_key

    async def _wait_while_held(self, slot_or_body: int | bytes) -> None:
        """A request pinned to a held slot gets no headers until the slot is free."""
        slot = slot_or_body if isinstance(slot_or_body, int) else self._slot_of(slot_or_body)
        while (held := self._held.get(slot)) is not None:
            await held.wait()

    def _slot_of(self, raw_body: bytes) -> int:
        try:
            slot = parse_json(raw_body).get("id_slot", -1)
        except (DecodeError, AttributeError):
            return 0
        return slot % self.n_slots if isinstance(slot, int) and slot >= 0 else 0

    def slot_state(self, slot: int) -> dict[str, Any]:
        busy = slot in self._held or slot in self._streaming
        return {"id": slot, "n_ctx": self.n_ctx, "speculative": False, "is_processing": busy}

    def _recorded(self, method: str, path: str) -> bool:
        """Whether an exchange for this method and path is left to replay. A `GET /slots`
        the recording did not capture is answered from the fake's own state, as the real
        server behind the recording would have answered it."""
        assert self._replay is not None
        return any((e.method, e.path) == (method, path) for e in self._replay)

    def _replayed(self, method: str, path: str) -> FakeResponse:
        """The next recorded exchange for this method and path, else the next one at all."""
        assert self._replay is not None
        if not self._replay:
            message = "fake server: the recording has no more exchanges"
            return json_answer(500, error_body(500, message, "server_error"))
        same = [e for e in self._replay if (e.method, e.path) == (method, path)]
        exchange = same[0] if same else self._replay[0]
        self._replay.remove(exchange)
        headers = list(exchange.response_headers)
        body = exchange.response_body
        if b"text/event-stream" in (exchange.header("content-type") or "").encode():
            return FakeResponse(exchange.status, exchange.reason, headers, sse_parts(body))
        return FakeResponse(exchange.status, exchange.reason, headers, body)

    def _next(self) -> Reply | Fault | None:
        return self._queue.popleft() if self._queue else self.default

    async def _completion(
        self, raw_body: bytes, headers: dict[str, str], connected: Connected
    ) -> FakeResponse:
        try:
            body, bad = parse_json(raw_body), None
        except DecodeError as exc:
            body, bad = None, exc
        made = self.responder(body) if self.responder and isinstance(body, dict) else None
        item = made or self._next()
        if isinstance(item, Fault) and item.stage() == "connect":
            await self._fault_before_connecting(item)
        await connected()
        if bad is not None:
            return json_answer(400, error_body(400, str(bad), "invalid_request_error"))
        slot = body.get("id_slot", -1)
        slot = slot % self.n_slots if isinstance(slot, int) and slot >= 0 else 0
        slot = 0 if self.kind == "openai" else slot  # no slots: one server-wide cache
        self.requests.setdefault(slot, []).append(body)
        response = await self._answer(item, body, headers, slot, scripted=made is None)
        self.statuses.setdefault(slot, []).append(response.status)
        return response

    async def _answer(
        self,
        item: Reply | Fault | None,
        body: dict[str, Any],
        headers: dict[str, str],
        slot: int,
        *,
        scripted: bool = True,
    ) -> FakeResponse:
        if self.loading:
            return json_answer(503, LOADING)
        if not self._authorized(headers):
            return json_answer(401, BAD_KEY)
        if self.ollama and not body.get("model"):
            return json_answer(400, error_body(400, "model is required", "invalid_request_error"))
        prompt = render(body)
        if has_image(body) and not self.vision:  # the real server's words (no --mmproj)
            message = (
                "image input is not supported - hint: if this is unexpected, you may need to "
                "provide the mmproj"
            )
            return json_answer(500, error_body(500, message, "server_error"))
        if item is None:
            message = "fake server: the script has no more replies"
            return json_answer(500, error_body(500, message, "server_error"))
        if over_context(self.kind, len(prompt), self.n_ctx, body):
            if scripted and item is not self.default:  # the model never ran: its reply is
                self._queue.appendleft(item)  # the next one's
            return context_full(self.kind, len(prompt), self.n_ctx, body)
        if isinstance(item, Fault) and item.stage() == "answer":
            return await self._fault_answer(item, prompt)
        await self._wait_while_held(slot)
        await self._slot_free[slot].acquire()
        self._streaming.add(slot)
        parts = self._stream(item, body, prompt, slot)
        sse = openai.sse_headers() if self.kind == "openai" else sse_headers()
        return FakeResponse(200, "OK", sse, parts)

    async def _fault_before_connecting(self, fault: Fault) -> None:
        match fault.kind:
            case FaultKind.REFUSED:
                raise Refused
            case FaultKind.STALL:
                await trio.sleep_forever()

    async def _fault_answer(self, fault: Fault, prompt: list[str]) -> FakeResponse:
        """The answer a fault gives instead of a stream."""
        match fault.kind:
            case FaultKind.LOADING:
                return json_answer(503, LOADING)
            case FaultKind.STATUS:
                message, type_ = STATUS_ERRORS[fault.status]
                return json_answer(fault.status, error_body(fault.status, message, type_))
            case FaultKind.SERVER_ERROR:
                message = "Failed to parse messages: scripted fault"
                return json_answer(500, error_body(500, message, "server_error"))
            case FaultKind.CONTEXT_FULL:
                return context_full(self.kind, len(prompt), self.n_ctx, {})
            case FaultKind.STALL:
                await trio.sleep_forever()
        raise AssertionError(f"{fault} is not answered instead of a stream")

    async def _stream(
        self, item: Reply | Fault, body: dict[str, Any], prompt: list[str], slot: int
    ) -> AsyncIterator[bytes | object]:
        """The events of one completion; the slot is held until the generator closes."""
        reply = (
            item if isinstance(item, Reply) else Reply(content="Partial answer before the fault.")
        )
        fault = item if isinstance(item, Fault) else None
        cache_n = self._cached(prompt, slot)
        self._count += 1
        w: ChunkWriter | openai.OpenAIChunkWriter
        if self.kind == "openai":
            w = openai.OpenAIChunkWriter(
                f"chatcmpl-{self._id(32).lower()}",
                self.model,
                1795990732 + self._count,
                details=self.cached_tokens,
            )
        else:
            w = ChunkWriter(f"chatcmpl-{self._id(32)}", self.model, 1795990732 + self._count)
        sent = Sent()
        events = 0
        # Token times are set from the start, as a real server generates at its own pace
        # whatever its client does: a slow reader does not slow the next token down.
        due = trio.current_time()
        try:
            parts = completion_parts(
                w,
                reply,
                body,
                prompt,
                cache_n,
                sent,
                self.timing,
                lambda: self._id(32),
                self.n_ctx,
            )
            for part in parts:
                if fault is not None and events == fault.after:
                    match fault.kind:
                        case FaultKind.CUT:
                            yield CUT
                        case FaultKind.ERROR_EVENT:
                            yield w.error(500, "Invalid diff: scripted fault", "server_error")
                        case FaultKind.STALL:
                            await trio.sleep_forever()
                    return
                if isinstance(part, float):
                    if part:
                        due += part / 1000
                        await trio.sleep_until(due)
                    continue
                events += 1
                yield part
            self.completed += 1
        finally:
            if self.kind == "openai":
                self._prefixes.append(prompt + sent.tokens())
            else:
                self._slot_tokens[slot] = prompt + sent.tokens()
            self._streaming.discard(slot)
            self._slot_free[slot].release()

    def _cached(self, prompt: list[str], slot: int) -> int:
        """The prompt tokens the cache holds: the longest prefix of the slot's tokens (or, for
        vLLM, of any earlier sequence, in whole blocks); at least one token is evaluated."""
        if self.kind == "openai":
            longest = max((common_prefix(seen, prompt) for seen in self._prefixes), default=0)
            reused = min(longest, len(prompt) - 1)
            return reused // self.cache_block * self.cache_block
        return min(common_prefix(self._slot_tokens.get(slot, []), prompt), len(prompt) - 1)

    def _id(self, n: int) -> str:
        return "".join(self._rng.choices(string.ascii_letters + string.digits, k=n))
