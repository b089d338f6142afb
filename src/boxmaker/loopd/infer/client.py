"""`Client`: completions from one server over httpx, under trio.

One `Client` per server (`servers.py` holds them and routes each slot to its own) is shared
by every session on it. It holds one `trio.CapacityLimiter(1)` per logical slot (the slot
gate, FIFO, held for a whole request with its retries; a gate too for each tier on the server,
whose requests go to the tier's own slot or name none) and one `httpx.AsyncClient`. A server
of `kind = "openai"` gets the OpenAI body only (`request.Dialect`) and is never asked
`/slots` or `/tokenize`. Every wait is a trio cancel scope:

- connect: from the start until the request headers go out (httpcore's `trace` says when);
- first byte: from then until the response headers (the server sends none while the task
  waits for its slot or works through a long prompt without progress);
- idle: between two chunks of the stream after that;
- completion: the whole of one completion, however lively its stream (`[inference]
  completion_timeout_s`), so a server that sends deltas or pings forever cannot hold a turn.

Nothing the server sends is held without a bound: an error body is read up to 64 KiB, the
answer of a small route up to 1 MiB, and a stream's lines are capped by the SSE decoder.

Cancelling the caller closes the HTTP stream at once, in a shielded and bounded cleanup, so the
server cancels its task. httpx's exceptions are mapped to `InferError` here and nowhere else
(`_http.mapped`), for the completions and for the server's other routes (`health`,
`count_tokens`, `tokenize`, `/slots`). When the response headers are late (the server sends
none while another client's task holds the slot), `GET /slots` says why, as a `waiting`
event; a request that is answered at once costs no extra round trip. `/slots` also gives each
slot's context once (`context_size`).
Events go to a synchronous `on_event` callback, so `queued.ahead` is exact: nothing else runs
between counting the queue and joining it.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import httpx
import trio

from ...config import DEFAULT_SERVER, Config
from ...profiles import Profile
from ...proto import (
    Baseline,
    ChatEvent,
    ChatRequest,
    Completion,
    DecodeError,
    Queued,
    Retrying,
    SystemMessage,
    Waiting,
    encode,
    parse_json,
)
from ._http import post_streaming, read_small, reading
from .errors import Http, InferError, ProtocolError, Timeout, context_sizes, is_retryable
from .request import (
    Dialect,
    backoff_ms,
    encode_request,
    output_tokens,
    profile_sampling,
    request_body,
)
from .routes import slot_state
from .sse import SSEDecoder
from .stream import ChunkFold, drain
from .thinking import ThinkingWatch, tokenizer_count

__all__ = ["Client", "HeldSlot", "OnEvent"]

OnEvent = Callable[[ChatEvent], None]

SLOT_CHECK_S = 0.1  # headers later than this: ask /slots whether another client holds the slot


class Client(trio.abc.AsyncResource):
    """Completions from one server, gated per slot.

    Args:
        config: the server's section (`[server]`, or `[servers.<server>]`), its slots of
            `[slots]` and `[inference]` are used.
        server: which server of the config.
        profile: the model's profile: its `output_cap` (and on an OpenAI-style server its
            context) caps `[inference] max_tokens` (`request.output_tokens`), and a model
            that does not reason gets no thinking fields.
        transport: an httpx transport (the fake server's `MockTransport` in tests).
        environ: where the API key variable named by `api_key_env` is looked up.
        rng: the source of backoff jitter (seeded in tests).
    """

    def __init__(
        self,
        config: Config,
        *,
        server: str = DEFAULT_SERVER,
        profile: Profile | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.name = server  # its name in the config: `default`, or `[servers.<name>]`
        self._server = config.server_config(server)
        self.llama = self._server.kind == "llama-server"
        self._inference = config.inference
        if profile is not None:
            cap = output_tokens(
                self._inference.max_tokens, profile.output_cap, profile.context, self.llama
            )
            sampling: dict[str, Any] = profile_sampling(self._inference, profile, llama=self.llama)
            self._inference = attrs.evolve(self._inference, max_tokens=cap, **sampling)
        thinking = profile is None or profile.thinking
        self._dialect = Dialect(self.llama, thinking, self._server.model)
        self.images = profile is not None and profile.images  # its profile says it takes images
        self._slots = {n: i for n, i in config.slots.items() if config.server_of(n) == server}
        self.gates = {name: trio.CapacityLimiter(1) for name in self._slots}
        # The tiers on this server (not `chat`): each its own slot id, or none, and gate.
        tiers = [(p, config.tier_slot(p)) for p, name in config.tiers.items() if name == server]
        self.tiers = {purpose: slot_id for purpose, slot_id in tiers if purpose != "chat"}
        self._tier_gates = {purpose: trio.CapacityLimiter(1) for purpose in self.tiers}
        self._rng = rng or random.Random()
        environ = os.environ if environ is None else environ
        key = environ.get(self._server.api_key_env) if self._server.api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(
            base_url=self._server.base_url,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(None),  # every wait is a trio cancel scope instead
        )
        # The completion request's URL and headers, merged once: httpx's `build_request`
        # parses and merges them again on every call, a tenth of a millisecond.
        template = self._http.build_request(
            "POST", "/v1/chat/completions", headers={"Content-Type": "application/json"}
        )
        self._chat_url = template.url
        self._chat_headers = template.headers.copy()
        del self._chat_headers["Content-Length"]  # set from each body
        self._n_ctx: dict[str, int] = {}  # each slot's context, once the server said it

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:
        return f"<Client {self._server.base_url} slots={sorted(self._slots)}>"

    async def health(self) -> str:
        """`GET /health` answers 200: the server is up and its model loaded. An OpenAI-style
        server that has no `/health` (404: Ollama) is up when `GET /v1/models` answers 200.
        The route that answered.

        Raises:
            InferError: `Http` with the status and body (503 while the model loads), or the
                connection failed, or no answer within the connect timeout.
        """
        seconds = self._server.connect_timeout_s
        with trio.move_on_after(seconds):
            route = "/health"
            status, body = await read_small(self._http, "GET", route)
            if status == 404 and not self.llama:
                route = "/v1/models"
                status, body = await read_small(self._http, "GET", route)
            if status != 200:
                raise Http(status, body)
            return route
        raise Timeout("connect", seconds)

    @property
    def cache_block(self) -> int:
        """Tokens per block of the server's prompt cache (`ServerConfig.block`)."""
        return self._server.block

    def slot_id(self, slot: str) -> int:
        """The server's slot id of the logical slot `slot` (KeyError when it is not one)."""
        return self._slots[slot]

    async def count_tokens(self, baseline: Baseline) -> int:
        """The baseline's prompt tokens by the server's own tokenizer.

        Asks `POST /v1/chat/completions/input_tokens` with the system message and the tools,
        as a request would send them.

        Raises:
            InferError: the server could not be asked, or answered something else.
        """
        fenced = baseline.fenced
        request = ChatRequest(
            slot=next(iter(self._slots), ""),
            messages=(SystemMessage(content=baseline.system), *(fenced.examples if fenced else ())),
            tools=() if fenced else baseline.tools,
        )
        body = request_body(request, 0, self._inference, self._dialect)
        answer = await self.call_json("POST", "/v1/chat/completions/input_tokens", body)
        tokens = answer.get("input_tokens") if isinstance(answer, dict) else None
        if type(tokens) is not int:
            raise ProtocolError(f"input_tokens answered {answer!r:.200}")
        return tokens

    async def call_json(self, method: str, path: str, body: Any = None) -> Any:
        """One request to another route of the server, within the connect and idle timeouts;
        its JSON answer (None for an empty body, as vLLM's `/health`).

        Raises:
            InferError: the server could not be asked, answered another status, or not JSON.
        """
        seconds = self._server.connect_timeout_s + self._server.idle_timeout_s
        with trio.move_on_after(seconds):
            content = None if body is None else encode(body)
            status, text = await read_small(self._http, method, path, content)
            if status != 200:
                raise Http(status, text)
            try:
                return parse_json(text) if text else None
            except DecodeError as exc:
                raise ProtocolError(f"{path} answered {exc}") from exc
        raise Timeout("first_byte", seconds)

    async def chat(self, request: ChatRequest, on_event: OnEvent) -> Completion:
        """One attempt at a completion, holding the slot's gate.

        Raises:
            InferError: whatever went wrong, mapped.
            KeyError: `request.slot` is not a slot of the config.
        """
        async with self._gate(self.gates[request.slot], on_event):
            return await self._attempt(request, on_event, self._slots[request.slot])

    async def chat_with_retry(self, request: ChatRequest, on_event: OnEvent) -> Completion:
        """`chat`, retrying failures that may pass, with backoff; the gate is held throughout.

        Before each retry, `Retrying(attempt, after_ms, error)` is emitted: what the channel
        showed of the failed attempt should be dropped.

        Raises:
            InferError: the last attempt's error, or the first one that cannot pass.
        """
        async with self.slot(request.slot, on_event) as held:
            return await held.chat_with_retry(request, on_event)

    @asynccontextmanager
    async def slot(self, slot: str, on_event: OnEvent) -> AsyncIterator[HeldSlot]:
        """Hold logical `slot`'s gate for the block (FIFO, a `queued {ahead}` event first when
        it must wait): the requests made through the `HeldSlot` are the slot's alone, and
        whatever the caller does in between (a slot restored from a save) is too.

        Raises:
            KeyError: `slot` is not a slot of this server.
        """
        async with self._gate(self.gates[slot], on_event):
            yield HeldSlot(self, slot)

    @asynccontextmanager
    async def tier_slot(self, purpose: str, on_event: OnEvent) -> AsyncIterator[HeldSlot]:
        """Hold the gate of `[tiers] <purpose>` on this server, as `slot` does a session's:
        its requests (each naming `purpose` as its slot) go to the tier's own server slot,
        or name none, and never to a session's.

        Raises:
            KeyError: `purpose` has no tier on this server.
        """
        async with self._gate(self._tier_gates[purpose], on_event):
            yield HeldSlot(self, purpose, tier=True)

    async def _with_retry(
        self, request: ChatRequest, on_event: OnEvent, tier: bool = False
    ) -> Completion:
        slot_id = self.tiers[request.slot] if tier else self._slots[request.slot]
        attempt = 1
        while True:
            try:
                return await self._attempt(request, on_event, slot_id)
            except InferError as error:
                if not tier and (sizes := context_sizes(error)) is not None:
                    self._n_ctx[request.slot] = sizes[1]  # the refusal names it
                if attempt >= self._inference.max_attempts or not is_retryable(error):
                    raise
                after = backoff_ms(attempt, self._inference, self._rng)
                attempt += 1
                on_event(Retrying(attempt=attempt, after_ms=after, error=str(error)))
                await trio.sleep(after / 1000)

    @asynccontextmanager
    async def _gate(self, gate: trio.CapacityLimiter, on_event: OnEvent) -> AsyncIterator[None]:
        stats = gate.statistics()
        ahead = stats.borrowed_tokens + stats.tasks_waiting
        if ahead:
            on_event(Queued(ahead=ahead))
        async with gate:
            yield

    async def _attempt(
        self, request: ChatRequest, on_event: OnEvent, slot_id: int | None
    ) -> Completion:
        if not request.thinking:
            return await self._stream(request, slot_id, on_event, None)
        with trio.CancelScope() as backstop:
            return await self._stream(request, slot_id, on_event, backstop)
        # Reasoning ran past the cap by the margin: the server is not enforcing the budget
        # (its template's reasoning tags were not detected). Ask again without thinking.
        completion = await self._stream(
            attrs.evolve(request, thinking=False), slot_id, on_event, None
        )
        return attrs.evolve(completion, thinking_capped=True)

    async def context_size(self, slot: str) -> int | None:
        """The context of the server's slot behind logical `slot`, in tokens: asked of
        `GET /slots` once and kept (a context-full refusal also says it); None while the
        server cannot say (`/slots` off, or the server unreachable: asked again next time;
        an OpenAI-style server has no `/slots` and is not asked)."""
        if slot not in self._n_ctx and self.llama:
            entry = await slot_state(self._http, self._slots[slot], self._server.connect_timeout_s)
            n_ctx = entry.get("n_ctx") if entry is not None else None
            if type(n_ctx) is int and n_ctx > 0:
                self._n_ctx[slot] = n_ctx
        return self._n_ctx.get(slot)

    async def tokenize(self, text: str) -> int:
        """How many tokens `text` is, by the server's tokenizer (`POST /tokenize`).

        Raises:
            InferError: the server could not be asked, or answered something else.
        """
        answer = await self.call_json("POST", "/tokenize", {"content": text})
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list):
            raise ProtocolError(f"/tokenize answered {str(answer)[:200]!r}")
        return len(tokens)

    async def _report_busy_slot(self, slot_id: int, on_event: OnEvent) -> None:
        """After `SLOT_CHECK_S` without response headers, ask `GET /slots` why, and emit
        `Waiting` when the slot is busy with another client; any failure says nothing."""
        await trio.sleep(SLOT_CHECK_S)
        entry = await slot_state(self._http, slot_id, self._server.connect_timeout_s)
        if entry is not None and entry.get("is_processing") is True:
            on_event(Waiting(slot_busy=entry["id"]))

    async def _stream(
        self,
        request: ChatRequest,
        slot_id: int | None,
        on_event: OnEvent,
        backstop: trio.CancelScope | None,
    ) -> Completion:
        cap = self._inference.thinking_cap if request.thinking else None
        fold = ChunkFold(thinking_cap=cap)
        watch = ThinkingWatch(fold, cap, partial(tokenizer_count, self) if self.llama else None)
        decoder = SSEDecoder()
        body = encode_request(request, slot_id, self._inference, self._dialect)
        seconds = self._inference.completion_timeout_s
        with trio.move_on_after(seconds):
            response = await self._connect(body, slot_id, on_event)
            async with reading(response, self._server.idle_timeout_s) as read:
                while chunk := await read():
                    decoder.receive_data(chunk)
                    drain(decoder, fold, on_event)
                    if backstop is not None and await watch.past_limit(on_event):
                        backstop.cancel()
                        await trio.lowlevel.checkpoint()
            decoder.receive_data(b"")
            drain(decoder, fold, on_event)
            await watch.settle(on_event)
            return fold.finish(self._server.block)
        raise Timeout("completion", seconds)

    async def _connect(self, body: bytes, slot_id: int | None, on_event: OnEvent) -> httpx.Response:
        """POST the body; the response once its headers came (`_http.post_streaming`), asking
        `/slots` meanwhile why the headers are late (the server sends none while another
        client's task holds the slot)."""
        post = httpx.Request("POST", self._chat_url, headers=self._chat_headers, content=body)
        meanwhile = None
        if self.llama and slot_id is not None:
            meanwhile = partial(self._report_busy_slot, slot_id, on_event)
        server = self._server
        return await post_streaming(
            self._http, post, server.connect_timeout_s, server.first_byte_timeout_s, meanwhile
        )


@attrs.frozen
class HeldSlot:
    """A slot whose gate the caller holds (`Client.slot`), or a tier's (`Client.tier_slot`:
    `name` is its purpose)."""

    client: Client
    name: str
    tier: bool = False

    async def chat_with_retry(self, request: ChatRequest, on_event: OnEvent) -> Completion:
        """As `Client.chat_with_retry`, in the gate already held.

        Raises:
            InferError: the last attempt's error, or the first one that cannot pass.
        """
        assert request.slot == self.name, f"a request for {request.slot} in {self.name}'s gate"
        return await self.client._with_retry(request, on_event, self.tier)
