"""The fake's `/props` and slot actions answer as llama-server's source says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from boxmaker.testing.fake_server import FakeLlamaServer, Reply

CHAT = {"messages": [{"role": "user", "content": "Hi."}], "id_slot": 0, "stream": True}
NOT_SUPPORTED = {
    "code": 501,
    "message": "This server does not support slots action. Start it with `--slot-save-path`",
    "type": "not_supported_error",
}


async def ask(fake: FakeLlamaServer, path: str, body: Any = None) -> tuple[int, Any]:
    async with httpx.AsyncClient(transport=fake.mock_transport(), base_url="http://f") as http:
        if body is None and path == "/props":
            response = await http.get(path)
        else:
            response = await http.post(path, content=json.dumps(body) if body is not None else b"")
        if "event-stream" in response.headers["content-type"]:
            return response.status_code, None
        return response.status_code, response.json()


async def test_props_names_the_process_and_a_restart_draws_a_new_marker() -> None:
    fake = FakeLlamaServer(default=Reply(content="Hello."))
    _, before = await ask(fake, "/props")
    assert before["media_marker"].startswith("<__media_")
    assert len(before["media_marker"]) == len("<__media_") + 32 + len("__>")
    assert before["total_slots"] == 1
    await ask(fake, "/v1/chat/completions", CHAT)
    fake.restart()
    _, after = await ask(fake, "/props")
    assert after["media_marker"] != before["media_marker"]
    assert fake.slot_tokens(0) == []


async def test_save_then_restore_puts_the_slot_back(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Hello."), slot_save_path=tmp_path)
    await ask(fake, "/v1/chat/completions", CHAT)
    held = fake.slot_tokens(0)
    status, saved = await ask(fake, "/slots/0?action=save", {"filename": "s.bin"})
    assert status == 200
    assert list(saved) == ["id_slot", "filename", "n_saved", "n_written", "timings"]
    assert saved["n_saved"] == len(held)
    assert saved["n_written"] == (tmp_path / "s.bin").stat().st_size
    fake.restart()
    status, restored = await ask(fake, "/slots/0?action=restore", {"filename": "s.bin"})
    assert status == 200
    assert list(restored) == ["id_slot", "filename", "n_restored", "n_read", "timings"]
    assert restored["n_restored"] == len(held)
    assert fake.slot_tokens(0) == held
    assert await ask(fake, "/slots/0?action=erase", {}) == (
        200,
        {"id_slot": 0, "n_erased": len(held)},
    )


async def test_slot_actions_fail_as_the_server_fails_them(tmp_path: Path) -> None:
    without = FakeLlamaServer()
    assert await ask(without, "/slots/0?action=save", {"filename": "s.bin"}) == (
        501, {"error": NOT_SUPPORTED},
    )  # fmt: skip
    fake = FakeLlamaServer(default=Reply(content="Hello."), slot_save_path=tmp_path)

    async def error(path: str, body: Any) -> tuple[int, str]:
        status, answer = await ask(fake, path, body)
        return status, answer["error"]["message"]

    assert await error("/slots/x?action=save", {"filename": "s.bin"}) == (400, "Invalid slot ID")
    assert await error("/slots/0?action=save", {}) == (
        400, "[json.exception.out_of_range.403] key 'filename' not found",
    )  # fmt: skip
    for name in ("../s.bin", "a/b", "a..b", "", " s", "s.", "a\\b"):
        assert await error("/slots/0?action=save", {"filename": name}) == (400, "Invalid filename")
    # A restore that fails clears the slot first, and says one thing whatever the reason.
    await ask(fake, "/v1/chat/completions", CHAT)
    (tmp_path / "bad.bin").write_bytes(b"junk")
    for name in ("bad.bin", "missing.bin"):
        assert await error("/slots/0?action=restore", {"filename": name}) == (
            400,
            "Unable to restore slot: No available space in KV cache or invalid slot save file",
        )
    assert fake.slot_tokens(0) == []
    # A negative id is not refused: it wraps, as the server's size_t modulo does.
    status, _ = await ask(fake, "/slots/-1?action=save", {"filename": "w.bin"})
    assert status == 200
