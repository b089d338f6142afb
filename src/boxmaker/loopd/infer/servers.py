"""Every server a config names, each behind its own `Client`, and what each says of itself.

`[server]` is the server named `default`; `[servers.<name>]` adds others, and each logical
slot of `[slots]` is on one of them. `Servers` routes a request to the client of its slot's
server, so a session (pinned to its slot when it is created) always goes to the same server
and slot, where its prompt cache is; each client keeps its own slot gates. A server `[tiers]`
names has its client too (`tier`), whether or not a slot is on it, and its context is asked
once (`context_of`): an epoch's summary goes there only when the epoch fits.

`server_facts` asks a server what `auto` needs (`profiles.choose`): llama-server's `/props`
(the model's name or path, the slot's context, whether the chat template makes tool calls),
or an OpenAI-style server's `/v1/models` (the model's id and, from vLLM, `max_model_len`).
`baseline_tokens` counts a baseline by the server: llama-server's tokenizer route, or, for an
OpenAI-style server, which has none, the usage of a one-token completion of the baseline.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import trio

from ...config import Config
from ...profiles import Profile, ServerFacts
from ...proto import Baseline, ChatRequest, Completion, SystemMessage
from .client import Client, HeldSlot, OnEvent
from .errors import InferError, ProtocolError

__all__ = ["Servers", "baseline_tokens", "server_facts", "takes_images"]


class Servers(trio.abc.AsyncResource):
    """A `Client` for each server the slots and tiers are on; requests go to their slot's
    server.

    Args:
        config: the whole config.
        profiles: each server's model profile, by server name (none: no profile's settings).
        transports: an httpx transport per server name (fake servers in tests).
    """

    def __init__(
        self,
        config: Config,
        *,
        profiles: Mapping[str, Profile] | None = None,
        transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
        environ: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        profiles, transports = profiles or {}, transports or {}
        self.clients = {
            name: Client(
                config,
                server=name,
                profile=profiles.get(name),
                transport=transports.get(name),
                environ=environ,
                rng=rng,
            )
            for name in config.servers_in_use()
        }
        self._contexts: dict[str, int] = {}  # each server's context, once it said it

    def __repr__(self) -> str:
        return f"<Servers {', '.join(self.clients)}>"

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    def client(self, name: str) -> Client:
        """The client of the server `name` (`default`, or a `[servers.<name>]` in use).

        Raises:
            InferError: no slot or tier is on a server of that name.
        """
        if name not in self.clients:
            raise InferError(f"no slot or tier of the config is on a server named {name!r}")
        return self.clients[name]

    def tier(self, purpose: str) -> Client | None:
        """The client of `[tiers] <purpose>`'s server (its requests through
        `Client.tier_slot`); None when `[tiers]` names none for it."""
        name = self.config.tier(purpose)
        return None if name is None else self.clients[name]

    async def context_of(self, name: str) -> int | None:
        """The context of the server `name`'s slots, in tokens, as it says it (`server_facts`:
        `/props`, or `/v1/models`' `max_model_len`): asked once and kept; None while it cannot
        say (asked again next time)."""
        if name not in self._contexts:
            try:
                facts = await server_facts(self.client(name), self.config.server_config(name).kind)
            except InferError:
                return None
            if facts.n_ctx is None or facts.n_ctx <= 0:
                return None
            self._contexts[name] = facts.n_ctx
        return self._contexts[name]

    def client_of(self, slot: str) -> Client:
        """The client of the server `slot` is on.

        Raises:
            InferError: the config names no such slot (a session pinned to a slot that was
                taken out of `[slots]`).
        """
        if slot not in self.config.slots:
            raise InferError(
                f"this session is pinned to slot {slot!r}, which [slots] no longer names; "
                "name it again (on the server the session was on) to go on with the session"
            )
        return self.clients[self.config.server_of(slot)]

    async def chat(self, request: ChatRequest, on_event: OnEvent) -> Completion:
        return await self.client_of(request.slot).chat(request, on_event)

    async def chat_with_retry(self, request: ChatRequest, on_event: OnEvent) -> Completion:
        return await self.client_of(request.slot).chat_with_retry(request, on_event)

    @asynccontextmanager
    async def slot(self, slot: str, on_event: OnEvent) -> AsyncIterator[HeldSlot]:
        """`Client.slot` of the server `slot` is on."""
        async with self.client_of(slot).slot(slot, on_event) as held:
            yield held


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


async def server_facts(client: Client, kind: str, model: str = "") -> ServerFacts:
    """What the server says of its model: of `model` (`[server] model`) when it is named,
    else of the first `/v1/models` lists.

    Raises:
        InferError: the server could not be asked, or its answer is not what it should be.
    """
    if kind == "openai":
        answer = await client.call_json("GET", "/v1/models")
        models = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(models, list) or not models or not isinstance(models[0], dict):
            raise ProtocolError(f"/v1/models answered {answer!r:.200}")
        named = [m for m in models if isinstance(m, dict) and m.get("id") == model]
        entry = named[0] if named else models[0]
        name = model or entry.get("id")
        return ServerFacts(
            name if isinstance(name, str) else None,
            _int(entry.get("max_model_len")) if named or not model else None,
        )
    props = await client.call_json("GET", "/props")
    if not isinstance(props, dict):
        raise ProtocolError(f"/props answered {props!r:.200}")
    name = props.get("model_alias") or props.get("model_path")
    settings = props.get("default_generation_settings")
    caps = props.get("chat_template_caps")
    tool_calls = caps.get("supports_tool_calls") if isinstance(caps, dict) else None
    return ServerFacts(
        name if isinstance(name, str) else None,
        _int(settings.get("n_ctx")) if isinstance(settings, dict) else None,
        tool_calls if isinstance(tool_calls, bool) else None,
    )


async def takes_images(client: Client) -> bool:
    """Whether the client's server takes image parts: llama-server's `/props` says so (its
    `modalities`, asked each time: a restart may load another model); an OpenAI-style
    server has no such route, and its model's profile's `images` says.

    Raises:
        InferError: llama-server could not be asked, or answered something else.
    """
    if not client.llama:
        return client.images
    props = await client.call_json("GET", "/props")
    modalities = props.get("modalities") if isinstance(props, dict) else None
    return isinstance(modalities, dict) and modalities.get("vision") is True


async def baseline_tokens(
    config: Config,
    server: str,
    baseline: Baseline,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """The baseline's prompt tokens by the server, and how they were counted when not by its
    tokenizer (else "").

    Raises:
        InferError: the server could not count them.
    """
    slot = next((s for s in config.slots if config.server_of(s) == server), "")
    if config.server_config(server).kind == "llama-server":
        async with Client(config, server=server, transport=transport, environ=environ) as client:
            return await client.count_tokens(baseline), ""
    # No tokenizer route: a completion of one token says how long its prompt was.
    one = attrs.evolve(config, inference=attrs.evolve(config.inference, max_tokens=1))
    fenced = baseline.fenced
    messages = (SystemMessage(content=baseline.system), *(fenced.examples if fenced else ()))
    request = ChatRequest(slot, messages, () if fenced else baseline.tools, thinking=False)
    async with Client(one, server=server, transport=transport, environ=environ) as client:
        completion = await client.chat(request, lambda _event: None)
    timings = completion.timings
    if timings.cache_n + timings.prompt_n <= 0:
        raise InferError("the server's usage gave no prompt tokens")
    how = "by the usage of a one-token completion (the server has no tokenizer route)"
    return timings.cache_n + timings.prompt_n, how
