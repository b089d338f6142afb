"""The recorder: what passes through it is relayed as it came and written without secrets."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio
from bxdev.recorder import Recorder, provenance

from boxmaker.testing._tcp import serve_tcp
from boxmaker.testing.fake_server import FakeLlamaServer, Reply
from boxmaker.testing.recording import load_recording

BODY = {"messages": [{"role": "user", "content": "hi ✓"}], "stream": True}
SECRET = "sk-do-not-write-me"


async def test_the_recorder_relays_exactly_and_writes_no_secret(tmp_path: Path) -> None:
    out = tmp_path / "capture.http"
    upstream = FakeLlamaServer(script=[Reply(content="Hello there")])
    async with trio.open_nursery() as nursery:
        up_port = await nursery.start(upstream.serve_tcp)
        recorder = Recorder(f"http://127.0.0.1:{up_port}", out, provenance("the fake", ["a test"]))
        port = await nursery.start(serve_tcp, recorder)
        headers = {"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers) as c:
            slots = await c.get("/slots")
            answer = await c.post("/v1/chat/completions", json=BODY)
        await recorder.settled()
        nursery.cancel_scope.cancel()
    await recorder.aclose()
    data = out.read_bytes()
    assert SECRET.encode() not in data
    assert b"authorization" not in data.lower()
    assert b"x-api-key" not in data.lower()
    recording = load_recording(data)
    assert recording.comments[0].startswith("Captured from a real llama-server at the fake")
    assert recording.comments[1] == "a test"
    first, second = recording.exchanges
    assert (first.method, first.path, first.response_body) == ("GET", "/slots", slots.content)
    assert (second.method, second.path, second.status) == ("POST", "/v1/chat/completions", 200)
    assert second.request_body == BODY
    assert second.response_body == answer.content
    assert second.header("content-type") == "text/event-stream"
    assert upstream.received[-1][2]["authorization"] == f"Bearer {SECRET}"  # forwarded, not kept
