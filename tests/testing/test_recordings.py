"""Real llama-server exchanges (recordings/*.http, captured by the recorder) replayed through
the client, and the fake server held to their shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from boxmaker import proto as p
from boxmaker.loopd.infer import Client, Http, InferError, is_context_full
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply
from boxmaker.testing.recording import Exchange, load_recording
from boxmaker.testing.shape import response_shape
from boxmaker.tools import CORE_TOOLS

from ..helpers import EventLog, make_config

RECORDINGS = Path(__file__).parents[2] / "recordings"
NAMES = [
    "plain", "progress", "reasoning", "thinking_capped", "clock", "find_tool", "call_tool",
    "context_full", "loading", "slots_busy", "fenced", "props",
]  # fmt: skip
REQUEST = p.ChatRequest(
    slot="main",
    messages=(p.SystemMessage("You are Boxmaker."), p.UserMessage("Hello")),
    tools=CORE_TOOLS,
)


def exchanges(name: str) -> tuple[Exchange, ...]:
    return load_recording((RECORDINGS / f"{name}.http").read_bytes()).exchanges


async def replay(name: str, config: str = "", times: int = 1) -> list[tuple[EventLog, Any]]:
    """Run `times` completions against the recording; each gives (events, completion or error)."""
    fake = FakeLlamaServer(exchanges=exchanges(name))
    results: list[tuple[EventLog, Any]] = []
    async with Client(make_config(config), transport=fake.mock_transport()) as client:
        for _ in range(times):
            log = EventLog()
            try:
                results.append((log, await client.chat(REQUEST, log)))
            except InferError as error:
                results.append((log, error))
    return results


def test_every_recording_is_a_real_capture() -> None:
    assert sorted(path.stem for path in RECORDINGS.glob("*.http")) == sorted(NAMES)
    for name in NAMES:
        first = (RECORDINGS / f"{name}.http").read_text().splitlines()[0]
        assert first.startswith("# Captured from a real llama-server at http://127.0.0.1:"), name
        assert "by boxmaker's recorder" in first


async def test_plain() -> None:
    [(log, completion)] = await replay("plain")
    assert completion.content.startswith("Hello there, welcome to my office.")
    assert log.text() == completion.content
    assert (completion.reasoning_content, completion.tool_calls) == (None, None)
    assert completion.finish_reason == "length"
    assert completion.timings.prompt_n == 108
    assert completion.timings.predicted_n == 24
    progress = log.of(p.Progress)
    assert [e.processed for e in progress] == [0, 108]  # type: ignore[attr-defined]


async def test_progress_of_a_long_prompt() -> None:
    [(log, completion)] = await replay("progress")
    total = completion.timings.cache_n + completion.timings.prompt_n
    progress = [(e.cache, e.processed) for e in log.of(p.Progress)]  # type: ignore[attr-defined]
    cache = completion.timings.cache_n
    assert progress == [(cache, cache), (cache, cache + 2048), (cache, total)]  # batches of 2048
    assert completion.content == "The boxmaker keeps every conversation in a"


async def test_reasoning() -> None:
    [(log, completion)] = await replay("reasoning")
    assert completion.content is None
    assert completion.reasoning_content.startswith("\n\nThe sky is blue because")
    assert log.text(p.Reasoning) == completion.reasoning_content
    assert completion.reasoning_tokens == len(log.of(p.Reasoning)) == 47
    assert completion.thinking_capped is False
    assert log.of(p.ThinkingCapped) == []


async def test_thinking_capped_the_server_cut_reasoning_after_16_tokens_in_14_deltas() -> None:
    # The server's budget counts tokens, and it merged some into one delta: 14 reasoning
    # deltas for a budget of 16. The client counts tokens: the deltas are short of the cap
    # while 48 tokens were generated in all, so it asked the server's tokenizer (the second
    # exchange), whose 15 tokens and the white-space token held back at the end make 16.
    [(log, completion)] = await replay("thinking_capped", "[inference]\nthinking_cap = 16\n")
    reasoning = [e for e in log.events if isinstance(e, p.Reasoning)]
    assert len(reasoning) == 14
    assert completion.content.startswith("\n\nThe sky is blue.")
    assert [(e.method, e.path) for e in exchanges("thinking_capped")][1] == ("POST", "/tokenize")
    assert completion.reasoning_tokens == 16
    assert completion.thinking_capped is True
    assert log.of(p.ThinkingCapped) == [p.ThinkingCapped(tokens=16)]
    assert log.events.index(p.ThinkingCapped(tokens=16)) == len(log.events) - 1  # at the end


async def test_thinking_capped_a_cap_the_deltas_reach_needs_no_count() -> None:
    [(log, capped)] = await replay("thinking_capped", "[inference]\nthinking_cap = 14\n")
    assert log.of(p.ThinkingCapped) == [p.ThinkingCapped(tokens=14)]  # at the 14th delta
    assert (capped.thinking_capped, capped.reasoning_tokens) == (True, 14)


async def test_thinking_capped_a_cap_above_the_count_is_not_reached() -> None:
    [(log, completion)] = await replay("thinking_capped", "[inference]\nthinking_cap = 17\n")
    assert (completion.thinking_capped, completion.reasoning_tokens) == (False, 16)
    assert log.of(p.ThinkingCapped) == []


async def test_clock_a_tool_call_then_the_answer() -> None:
    [(log, calls), (_log, answer)] = await replay("clock", times=2)
    assert [(c.name, c.arguments) for c in calls.tool_calls] == [
        ("clock", "{}"),
        ("find_tool", '{\n\n"query": "find_tool {query}"\n\n}'),
    ]
    assert all(len(c.id) == 32 for c in calls.tool_calls)
    assert calls.finish_reason == "tool_calls"
    assert calls.content is None
    assert [d.index for d in log.of(p.ToolCallDelta)][:2] == [0, 0]  # type: ignore[attr-defined]
    assert answer.content == "It is not possible to match a tool with a specific one."
    assert answer.finish_reason == "stop"


async def test_find_tool() -> None:
    [(_log, completion)] = await replay("find_tool")
    [call] = completion.tool_calls
    assert call.name == "find_tool"
    assert json.loads(call.arguments) == {"query": "echo"}


async def test_call_tool_then_the_answer() -> None:
    [(_log, calls), (_, answer)] = await replay("call_tool", times=2)
    first, *others = calls.tool_calls
    assert first.name == "call_tool"
    assert json.loads(first.arguments) == {"name": "echo", "arguments": {"text": "hi"}}
    assert [c.name for c in others] == ["find_tool"] * 4
    assert calls.finish_reason == "length"
    assert answer.content.startswith("You can use the `call_tool` function")


async def test_context_full() -> None:
    [(log, error)] = await replay("context_full")
    assert isinstance(error, Http)
    assert error.status == 400
    assert is_context_full(error)
    assert "request (6391 tokens) exceeds the available context size (4096 tokens)" in error.body
    assert log.events == []


async def test_loading() -> None:
    [(log, error)] = await replay("loading")
    assert isinstance(error, Http)
    assert error.status == 503
    assert json.loads(error.body) == {
        "error": {"message": "Loading model", "type": "unavailable_error", "code": 503}
    }
    assert log.events == []  # /slots answered 503 too: no waiting event, no error from it


async def test_slots_busy() -> None:
    # As captured: the POST got no headers while another client held the slot, so the
    # client asked /slots, which said busy. Replayed with the slot held the same way.
    recorded = exchanges("slots_busy")
    assert [(e.method, e.path) for e in recorded] == [
        ("GET", "/slots"), ("POST", "/v1/chat/completions"),
    ]  # fmt: skip
    assert json.loads(recorded[0].response_body)[0]["is_processing"] is True
    fake = FakeLlamaServer(exchanges=recorded)
    fake.hold(0)
    log = EventLog()
    async with (
        Client(make_config(), transport=fake.mock_transport()) as client,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(client.chat, REQUEST, log)
        await log.wait_for(p.Waiting)
        fake.release(0)
    assert log.events[0] == p.Waiting(slot_busy=0)
    assert log.text() == "I'm not. I'm a tool. I'm a"


# --- the fake against the real bytes ----------------------------------------------------------


def completion_exchange(name: str, index: int = 0) -> Exchange:
    return [e for e in exchanges(name) if e.path == "/v1/chat/completions"][index]


async def fake_answer(fake: FakeLlamaServer, body: Any, path: str = "/v1/chat/completions"
                      ) -> httpx.Response:  # fmt: skip
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://fake") as c:
        if path == "/slots":
            return await c.get(path)
        return await c.post(path, content=p.encode(body))


CASES = [
    ("plain", 0, Reply(content="Some words here.", finish_reason="length")),
    ("reasoning", 0, Reply(reasoning="Some thought here.", finish_reason="length")),
    ("thinking_capped", 0, Reply(reasoning="A thought.", content="Words.", finish_reason="length")),
    ("clock", 0, Reply(tool_calls=(("clock", "{}"), ("find_tool", '{"query": "x"}')))),
    ("clock", 1, Reply(content="It is noon.")),
    ("find_tool", 0, Reply(tool_calls=(("find_tool", '{"query": "echo"}'),))),
    ("context_full", 0, Fault(FaultKind.CONTEXT_FULL)),
    ("loading", 0, Fault(FaultKind.LOADING)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "index", "item"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
async def test_the_fake_answers_in_the_real_server_s_shape(
    name: str, index: int, item: Reply | Fault
) -> None:
    real = completion_exchange(name, index)
    fake = FakeLlamaServer(script=[item])
    response = await fake_answer(fake, real.request_body)
    expected = response_shape(real.status, dict(real.response_headers), real.response_body)
    got = response_shape(response.status_code, dict(response.headers), response.content)
    assert got.describe() == expected.describe()


def test_a_shape_sees_a_difference() -> None:
    real = completion_exchange("plain")
    body = real.response_body.replace(b'"system_fingerprint"', b'"fingerprint"', 1)
    headers = dict(real.response_headers)
    assert response_shape(200, headers, body) != response_shape(200, headers, real.response_body)
