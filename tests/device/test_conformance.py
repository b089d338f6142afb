"""The fake server against the real one: for the same cases, responses of the same shape
(status, content type, the sequence of chunk shapes, error bodies, [DONE]).

When the server changes, this says what the fake must learn. The fake is scripted with what
the real server produced (its text, reasoning and tool calls), so only structure is compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from bxdev.llama import LlamaServer, open_llama_server

from boxmaker import proto as p
from boxmaker.config import parse_config
from boxmaker.loopd.infer import END, NEED_DATA, ChunkFold, SSEDecoder, request_body
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply
from boxmaker.testing.shape import Shape, response_shape
from boxmaker.tools import CORE_TOOLS

INFERENCE = parse_config(
    "[inference]\ntemperature = 0.0\nmax_tokens = 24\n", Path("/x/config.toml"), {}
).inference


def body(question: str, **extra: Any) -> dict[str, Any]:
    request = p.ChatRequest(
        slot="main",
        messages=(p.SystemMessage("You are Boxmaker."), p.UserMessage(question)),
        tools=CORE_TOOLS,
    )
    return {**request_body(request, 0, INFERENCE), **extra}


async def real_answer(server: LlamaServer, payload: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, timeout=300) as client:
        return await client.post("/v1/chat/completions", content=p.encode(payload))


def as_reply(response: httpx.Response) -> Reply:
    """What the real server produced, as a script for the fake."""
    decoder, fold = SSEDecoder(), ChunkFold()
    decoder.receive_data(response.content)
    decoder.receive_data(b"")
    while (payload := decoder.next_event()) not in (NEED_DATA, END):
        fold.feed(str(payload))
    done = fold.finish()
    calls = tuple((c.name, c.arguments) for c in done.tool_calls or ())
    return Reply(done.content, done.reasoning_content, calls, done.finish_reason)


async def fake_answer(item: Reply | Fault, payload: dict[str, Any]) -> httpx.Response:
    fake = FakeLlamaServer(script=[item])
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://f") as c:
        return await c.post("/v1/chat/completions", content=p.encode(payload))


def shape(response: httpx.Response) -> Shape:
    return response_shape(response.status_code, dict(response.headers), response.content)


async def same_shape(
    server: LlamaServer, payload: dict[str, Any], fault: Fault | None = None
) -> None:
    real = await real_answer(server, payload)
    fake = await fake_answer(fault or as_reply(real), payload)
    assert shape(fake).describe() == shape(real).describe(), server.log_tail()


async def test_a_plain_answer(llama_server: LlamaServer) -> None:
    await same_shape(llama_server, body("Say hello to Ana."))


async def test_the_context_full_400(llama_server: LlamaServer) -> None:
    long = " ".join(f"Line {i}: the boxmaker keeps every conversation." for i in range(500))
    await same_shape(llama_server, body(long), Fault(FaultKind.CONTEXT_FULL))


async def test_reasoning(tmp_path: Path) -> None:
    async with open_llama_server(tmp_path, template="Qwen-QwQ-32B.jinja") as server:
        await same_shape(server, body("Why is the sky blue?"))
        await same_shape(server, body("Why is the sky blue?", reasoning_budget_tokens=8))


async def test_a_tool_call(tmp_path: Path) -> None:
    template = "meetkai-functionary-medium-v3.2.jinja"
    async with open_llama_server(tmp_path, template=template) as server:
        payload = body("Echo the text hello. Use find_tool to find the echo tool.")
        real = await real_answer(server, {**payload, "tool_choice": "required"})
        assert as_reply(real).tool_calls, "the model made no tool call"
        fake = await fake_answer(as_reply(real), payload)
        assert shape(fake).describe() == shape(real).describe()


async def test_503_while_the_model_loads(tmp_path: Path) -> None:
    payload = body("Hello?")
    for _attempt in range(20):
        async with open_llama_server(tmp_path, ready=False) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=300) as client:
                while True:
                    try:
                        real = await client.post("/v1/chat/completions", content=p.encode(payload))
                    except httpx.ConnectError:
                        continue  # not listening yet
                    break
            if real.status_code == 503:
                fake = await fake_answer(Fault(FaultKind.LOADING), payload)
                assert shape(fake) == shape(real)
                return
    pytest.fail("the server never answered 503 while loading")


async def test_slots_of_a_fresh_server(llama_server: LlamaServer) -> None:
    fake = FakeLlamaServer()
    async with (
        httpx.AsyncClient(base_url=llama_server.url) as real_client,
        httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://f") as fake_client,
    ):
        real, faked = await real_client.get("/slots"), await fake_client.get("/slots")
    assert shape(faked) == shape(real)
    await trio.lowlevel.checkpoint()


async def test_generation_stops_where_the_context_is_full(tmp_path: Path) -> None:
    """The real server stops generating when the prompt and the answer fill the slot's
    context, with `length`; the fake does the same (`tests/testing/test_fake_server.py`)."""
    question = " ".join(f"Item {i} is here." for i in range(25)) + " Now tell a long story."
    payload = {**body(question), "max_tokens": 500, "stream": False}
    async with (
        open_llama_server(tmp_path, ctx=256) as server,
        httpx.AsyncClient(base_url=server.url, timeout=300) as client,
    ):
        real = (await client.post("/v1/chat/completions", content=p.encode(payload))).json()
    timings = real["timings"]
    assert real["choices"][0]["finish_reason"] == "length"
    assert timings["cache_n"] + timings["prompt_n"] + timings["predicted_n"] == 256
