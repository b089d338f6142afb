"""The fake llama-server: the real server's wire, its cache model, replay, routes, TCP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from boxmaker.proto import encode
from boxmaker.testing._tcp import _serve_connection
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply, Timing
from boxmaker.testing.recording import Exchange

from ..helpers import BrokenPipe

SYSTEM = {"role": "system", "content": "You are Boxmaker."}
BODY: dict[str, Any] = {
    "messages": [SYSTEM, {"role": "user", "content": "Hello there"}],
    "tools": [{"type": "function", "function": {"name": "clock", "description": "time"}}],
    "stream": True,
    "stream_options": {"include_usage": True},
    "return_progress": True,
    "id_slot": 0,
}
HEAD_KEYS = ["choices", "created", "id", "model", "system_fingerprint", "object"]


async def post(fake: FakeLlamaServer, body: dict[str, Any], path: str = "/v1/chat/completions"
               ) -> httpx.Response:  # fmt: skip
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://fake") as c:
        return await c.post(path, content=encode(body))


def events_of(response: httpx.Response) -> list[Any]:
    raw = response.content.decode()
    assert raw.endswith("data: [DONE]\n\n")
    chunks = raw.split("\n\n")[:-2]
    assert all(chunk.startswith("data: ") for chunk in chunks)
    return [json.loads(chunk.removeprefix("data: ")) for chunk in chunks]


def timings(response: httpx.Response) -> dict[str, Any]:
    last: dict[str, Any] = events_of(response)[-1]["timings"]
    return last


async def test_a_scripted_completion_streams_in_the_server_s_chunk_format() -> None:
    fake = FakeLlamaServer(
        script=[Reply(content="Hi you", reasoning="Hm", tool_calls=(("clock", "{}"),))]
    )
    response = await post(fake, BODY)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = events_of(response)
    first = events[0]
    assert list(first) == [*HEAD_KEYS, "prompt_progress"]
    assert first["choices"] == [
        {"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}
    ]
    total = first["prompt_progress"]["total"]
    assert first["prompt_progress"] == {"total": total, "cache": 0, "processed": 0, "time_ms": 0}
    deltas = [e["choices"][0]["delta"] for e in events[1:-2]]
    assert events[1]["prompt_progress"]["processed"] == total
    assert deltas[1] == {"role": "assistant", "content": None}
    assert deltas[2:] == [
        {"reasoning_content": "Hm"},
        {"content": "Hi"},
        {"content": " you"},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": deltas[5]["tool_calls"][0]["id"],
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{"},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
    ]
    finish, usage = events[-2], events[-1]
    assert finish["choices"] == [{"finish_reason": "tool_calls", "index": 0, "delta": {}}]
    assert list(usage) == [*HEAD_KEYS, "usage", "timings"]
    assert usage["choices"] == []
    assert list(usage["timings"]) == [
        "cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
        "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second",
    ]  # fmt: skip
    assert usage["usage"]["prompt_tokens"] == total
    assert len({e["id"] for e in events}) == 1


async def test_the_cache_holds_the_prompt_and_what_was_generated() -> None:
    fake = FakeLlamaServer(script=[Reply(content="Hi you"), Reply(content="Fine")])
    first = timings(await post(fake, BODY))
    answered = {"role": "assistant", "content": "Hi you"}
    follow_up = {
        **BODY,
        "messages": [*BODY["messages"], answered, {"role": "user", "content": "And?"}],
    }
    second = timings(await post(fake, follow_up))
    generated = 2  # "Hi", " you"
    assert second["cache_n"] == first["prompt_n"] + generated
    assert second["cache_n"] >= first["cache_n"] + first["prompt_n"]  # a hit, as the loop sees it


async def test_a_change_in_an_earlier_message_is_a_loss() -> None:
    fake = FakeLlamaServer(script=[Reply(content="Hi"), Reply(content="Again")])
    first = timings(await post(fake, BODY))
    edited = {
        **BODY,
        "messages": [{"role": "system", "content": "You are Other."}, *BODY["messages"][1:]],
    }
    second = timings(await post(fake, edited))
    assert second["cache_n"] < first["prompt_n"]


async def test_the_same_prompt_twice_reuses_all_but_one_token() -> None:
    fake = FakeLlamaServer(script=[Reply(content="Hi"), Reply(content="Hi")])
    first = timings(await post(fake, BODY))
    second = timings(await post(fake, BODY))
    assert second["cache_n"] == first["prompt_n"] - 1
    assert second["prompt_n"] == 1


async def test_max_tokens_stops_the_answer_there_with_length() -> None:
    reply = Reply(reasoning="let me see", content="one two three four", tool_calls=(("f", "{}"),))
    fake = FakeLlamaServer(script=[reply, reply])
    events = events_of(await post(fake, {**BODY, "max_tokens": 5}))
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "let me see"
    assert "".join(d.get("content") or "" for d in deltas) == "one two"
    assert not any("tool_calls" in d for d in deltas)
    finishes = [e["choices"][0]["finish_reason"] for e in events if e["choices"]]
    assert finishes[-1] == "length"
    whole = events_of(await post(fake, {**BODY, "max_tokens": 99}))
    assert [e["choices"][0]["finish_reason"] for e in whole if e["choices"]][-1] == "tool_calls"


async def test_thinking_off_renders_an_empty_think_block() -> None:
    fake = FakeLlamaServer(script=[Reply(content="x")])
    thinking = timings(await post(fake, BODY))
    fake = FakeLlamaServer(script=[Reply(content="x")])
    off = timings(await post(fake, {**BODY, "chat_template_kwargs": {"enable_thinking": False}}))
    assert off["prompt_n"] == thinking["prompt_n"] + 2


async def test_a_prompt_over_the_context_is_the_real_400() -> None:
    fake = FakeLlamaServer(script=[Reply(content="x")], n_ctx=16)
    response = await post(fake, BODY)
    assert response.status_code == 400
    error = response.json()["error"]
    assert list(error) == ["code", "message", "type", "n_prompt_tokens", "n_ctx"]
    assert error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == 16
    assert "exceeds the available context size (16 tokens)" in error["message"]


async def test_every_body_is_recorded_per_slot() -> None:
    fake = FakeLlamaServer(
        script=[Reply(content="a"), Fault(FaultKind.LOADING), Reply(content="b")], n_slots=2
    )
    await post(fake, BODY)
    await post(fake, BODY)
    await post(fake, {**BODY, "id_slot": 3})
    assert [len(fake.requests[0]), len(fake.requests[1])] == [2, 1]
    assert fake.requests[1][0]["id_slot"] == 3


async def test_replay_answers_in_order_whatever_was_asked() -> None:
    json_type = (("Content-Type", "application/json"),)
    sse_type = (("Content-Type", "text/event-stream"),)
    exchanges = [
        Exchange("GET", "/health", (), None, 503, "Service Unavailable", json_type, b'{"a":1}'),
        Exchange("POST", "/x", (), None, 200, "OK", sse_type, b"data: 1\n\ndata: [DONE]\n\n"),
    ]
    fake = FakeLlamaServer(exchanges=exchanges)
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://f") as client:
        first = await client.post("/v1/chat/completions", content=b"{}")
        second = await client.get("/anything")
        third = await client.get("/health")
    assert (first.status_code, first.content) == (503, b'{"a":1}')
    assert (second.status_code, second.content) == (200, b"data: 1\n\ndata: [DONE]\n\n")
    assert third.status_code == 500
    assert "no more exchanges" in third.text


async def test_the_utility_routes() -> None:
    fake = FakeLlamaServer(n_slots=2)
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://f") as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        slots = (await client.get("/slots")).json()
        assert [(s["id"], s["is_processing"]) for s in slots] == [(0, False), (1, False)]
        fake.hold(1)
        assert (await client.get("/slots")).json()[1]["is_processing"] is True
        assert (await client.post("/tokenize", json={"content": "hello world"})).json()["tokens"]
        prompt = (await client.post("/apply-template", json=BODY)).json()["prompt"]
        assert prompt.startswith("<|system|>You are Boxmaker.<|end|><tools>")
        assert prompt.endswith("<|assistant|>")
        counted = (await client.post("/v1/chat/completions/input_tokens", json=BODY)).json()
        assert counted["object"] == "response.input_tokens"
        assert counted["input_tokens"] > 10
        missing = await client.get("/nope")
        assert missing.status_code == 404
        assert (
            missing.content
            == b'{"error":{"message":"File Not Found","type":"not_found_error","code":404}}'
        )
        fake.loading = True
        loading = await client.get("/health")
        assert loading.status_code == 503
        assert loading.json()["error"]["message"] == "Loading model"


async def test_an_api_key_is_checked_except_on_health() -> None:
    fake = FakeLlamaServer(script=[Reply(content="x")], api_key="k")
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://f") as client:
        assert (await client.get("/health")).status_code == 200
        assert (await client.get("/slots")).status_code == 401
        assert (
            await client.get("/slots", headers={"Authorization": "Bearer k"})
        ).status_code == 200


async def test_tcp_and_in_process_send_the_same_bytes() -> None:
    script = [
        Reply(content="Same bytes, é ✓", reasoning="Think", tool_calls=(("echo", '{"text":"x"}'),))
    ]
    in_process = await post(FakeLlamaServer(script=script), BODY)
    tcp_fake = FakeLlamaServer(script=script)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(tcp_fake.serve_tcp)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            over_tcp = await client.post("/v1/chat/completions", content=encode(BODY))
            health = await client.get("/health")
        nursery.cancel_scope.cancel()
    assert over_tcp.status_code == in_process.status_code == 200
    assert over_tcp.content == in_process.content
    assert over_tcp.headers["transfer-encoding"] == "chunked"
    assert health.json() == {"status": "ok"}
    assert tcp_fake.requests[0] == [BODY]


async def test_tcp_cut_and_client_leaving() -> None:
    fake = FakeLlamaServer(script=[Fault(FaultKind.CUT, after=3), Fault(FaultKind.STALL, after=3)])
    async with trio.open_nursery() as nursery:
        port = await nursery.start(fake.serve_tcp)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
                await client.post("/v1/chat/completions", content=encode(BODY))
            async with client.stream("POST", "/v1/chat/completions", content=encode(BODY)) as r:
                async for _chunk in r.aiter_raw():
                    break
        await fake.wait_for_disconnects(1)  # the fake notices the client's end of file
        nursery.cancel_scope.cancel()
    assert fake.disconnects == 1
    assert fake.slot_tokens(0)  # the slot was released with what it had


async def test_a_connection_that_breaks_while_answered_is_a_disconnect_not_a_crash() -> None:
    """The soak's kill test found this: the broken pipe came out of the answer's nursery in
    a group, and the fake died with it."""
    fake = FakeLlamaServer(default=Reply(content="ok"))
    body = encode(BODY)
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: "
               b"application/json\r\ncontent-length: %d\r\n\r\n%b") % (len(body), body)  # fmt: skip
    await _serve_connection(fake, BrokenPipe(request))
    assert fake.disconnects == 1


def test_the_command_line_fake_serves_on_a_port(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"replies": [{"content": "scripted"}], "default": {"content": "again"}})
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "boxmaker.testing", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("fake llama-server listening on http://127.0.0.1:")
        url = line.split()[-1]
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/health").json() == {"status": "ok"}
            answers = [client.post("/v1/chat/completions", json=BODY).text for _ in range(2)]
        assert '"content":"scripted"' in answers[0]
        assert '"content":"again"' in answers[1]
    finally:
        process.terminate()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


async def test_timing_is_virtual_work(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeLlamaServer(script=[Reply(content="a b c d")], timing=Timing(ms_per_token=250.0))
    await post(fake, BODY)
    assert trio.current_time() == pytest.approx(1.0)


async def test_generation_stops_where_the_slot_s_context_is_full() -> None:
    fake = FakeLlamaServer(script=[Reply(content=" ".join(["word"] * 500))], n_ctx=40)
    body = {"messages": [{"role": "user", "content": "Tell a story."}], "stream": True}
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://f") as client:
        streamed = await client.post("/v1/chat/completions", json=body)
    usage = [json.loads(line[6:]) for line in streamed.text.splitlines() if "timings" in line]
    timings = usage[0]["timings"]
    assert timings["cache_n"] + timings["prompt_n"] + timings["predicted_n"] == 40  # as the real
    assert '"finish_reason":"length"' in streamed.text
