"""Several servers: slots on each (`[servers.<name>]`, `"<server>:<id>"`), each new session
pinned to a slot, and every request of a session going to its own server and slot, so its
prompt cache stays where it is; each server's model profile decides its sessions' baselines."""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.config import Config
from boxmaker.loopd.cache import FRESH_SECONDS, prefix_hash
from boxmaker.loopd.infer import InferError, Servers
from boxmaker.loopd.service import Daemon, slot_for
from boxmaker.profiles import load_profile
from boxmaker.store import Store
from boxmaker.testing import FakeTools
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import make_config

# As the self-test chooses it for the fake vLLM: its context (from `/v1/models`) caps
# `max_tokens`, which vLLM would refuse at 16,384 with a 4,096-token context.
GPU = attrs.evolve(load_profile("native"), context=4096)
TWO = """
[servers.gpu]
base_url = "http://gpu.local:8000"
kind = "openai"
[slots]
main = 0
second = 1
big = "gpu:0"
"""


def config_in(home: Path, text: str = TWO) -> Config:
    (home / "system.md").parent.mkdir(parents=True, exist_ok=True)
    (home / "system.md").write_text("You are Boxmaker, in a test.\n")
    return make_config(f'[baseline]\nsystem = "{home}/system.md"\n{text}', home)


@asynccontextmanager
async def open_daemon(
    home: Path, fakes: dict[str, FakeLlamaServer], text: str = TWO, **kwargs: Any
) -> AsyncIterator[Daemon]:
    config = config_in(home, text)
    clock = TickingClock()
    transports = {name: fake.mock_transport() for name, fake in fakes.items()}
    async with Servers(config, transports=transports, rng=random.Random(0), **kwargs) as servers:
        daemon = Daemon(config, servers, FakeTools(clock), clock,
                        store=Store(home, clock), **kwargs)  # fmt: skip
        try:
            yield daemon
        finally:
            daemon.close()


async def turn(
    daemon: Daemon, session: str, text: str, resume: bool, events: list[object] | None = None
) -> p.TurnDoneFrame:
    delivered: list[p.TurnDoneFrame | p.WireError] = []

    async def deliver(frame: p.TurnDoneFrame | p.WireError) -> None:
        delivered.append(frame)

    frame = p.TurnFrame(p.SessionId(session), text, resume, True)
    await daemon.turn(frame, (events if events is not None else []).append, deliver)
    [answer] = delivered
    assert isinstance(answer, p.TurnDoneFrame), answer
    return answer


def test_the_slots_of_two_servers_are_read() -> None:
    config = make_config(TWO)
    assert config.slots == {"main": 0, "second": 1, "big": 0}
    assert [config.server_of(s) for s in config.slots] == ["default", "default", "gpu"]
    assert config.servers_in_use() == ["default", "gpu"]
    assert config.server_config("gpu").kind == "openai"
    assert config.server_config("gpu").block == 16
    assert config.server.block == 1


def test_a_new_session_s_slot_is_stable_and_the_slots_share_the_sessions() -> None:
    config = make_config(TWO)
    chosen = [slot_for(p.SessionId(f"chat-{n}"), config) for n in range(300)]
    assert chosen == [slot_for(p.SessionId(f"chat-{n}"), config) for n in range(300)]
    assert {slot: chosen.count(slot) > 70 for slot in config.slots} == dict.fromkeys(
        config.slots, True
    )
    assert slot_for(p.SessionId("chat-1"), make_config()) == "main"  # one slot: always it


async def test_sessions_are_pinned_to_their_slot_on_their_own_server(tmp_path: Path) -> None:
    local = FakeLlamaServer(n_slots=2, default=Reply(content="Local."))
    gpu = FakeLlamaServer(kind="openai", default=Reply(content="Big."))
    names = [f"s{n}" for n in range(12)]
    fakes = {"default": local, "gpu": gpu}
    async with open_daemon(tmp_path, fakes, profiles={"gpu": GPU}) as daemon:
        for name in names:
            await turn(daemon, name, "Hello.", resume=False)
        slots = {name: daemon.store.folder(p.SessionId(name)) for name in names}
        pinned = {}
        for name in names:
            first = (slots[name] / "0.jsonl").read_text().splitlines()[0]
            pinned[name] = p.loads(p.LogRecord, first[: first.index(',"seq"')] + "}").slot
        daemon.close()  # forget them: the second turns resume from the disk
        for name in names:
            answer = await turn(daemon, name, "Again.", resume=True)
            assert answer.content == ("Big." if pinned[name] == "big" else "Local.")
    assert set(pinned.values()) == {"main", "second", "big"}
    on_gpu = sum(slot == "big" for slot in pinned.values())
    assert len(gpu.requests[0]) == 2 * on_gpu
    by_slot = {slot: len(local.requests.get(slot, [])) for slot in (0, 1)}
    assert by_slot == {
        0: 2 * sum(s == "main" for s in pinned.values()),
        1: 2 * sum(s == "second" for s in pinned.values()),
    }
    assert all(body["id_slot"] == slot for slot in (0, 1) for body in local.requests.get(slot, []))
    assert all("id_slot" not in body for body in gpu.requests[0])


async def test_each_server_s_profile_makes_its_sessions_baselines(tmp_path: Path) -> None:
    local = FakeLlamaServer(n_slots=2, default=Reply(content="Local."))
    gpu = FakeLlamaServer(kind="openai", default=Reply(content="Big."))
    profiles = {"default": load_profile("smollm2-135m"), "gpu": GPU}
    names = [f"p{n}" for n in range(8)]
    async with open_daemon(tmp_path, {"default": local, "gpu": gpu}, profiles=profiles) as daemon:
        for name in names:
            await turn(daemon, name, "Hello.", resume=False)
        sessions = [daemon.store.resume(p.SessionId(name)) for name in names]
    for session in sessions:
        fenced = session.baseline.fenced is not None
        assert fenced == (session.slot != "big"), session.slot
        session.close()
    assert all("tools" not in body for slot in (0, 1) for body in local.requests.get(slot, []))
    assert all(len(body["tools"]) == 14 for body in gpu.requests.get(0, []))  # 4 core, 10 brokerd


async def test_a_session_pinned_to_a_slot_taken_out_of_the_config_says_so(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    async with Servers(config) as servers:
        with pytest.raises(InferError, match="pinned to slot 'gone', which \\[slots\\] no longer"):
            servers.client_of("gone")


# --- each llama-server watched on its own ------------------------------------------

TWO_LLAMAS = """
[servers.b]
base_url = "http://b.local:8080"
[slots]
main = 0
other = "b:0"
"""


def session_on(slot: str, config: Config) -> str:
    """A session id that a new session on `slot` would have."""
    ids = (f"chat-{n}" for n in range(1000))
    return next(name for name in ids if slot_for(p.SessionId(name), config) == slot)


def props_asked(fake: FakeLlamaServer) -> int:
    return sum(path == "/props" for _method, path, _headers in fake.received)


def told(events: list[object]) -> list[str]:
    """What the turn's `cache_cold` and `cache_loss` events said."""
    return [e.detail for e in events if isinstance(e, (p.CacheCold, p.CacheLoss))]


async def test_each_llama_server_is_watched_and_its_restart_told_to_its_own_sessions(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    a = FakeLlamaServer(default=Reply(content="A."))
    b = FakeLlamaServer(default=Reply(content="B."), seed=1)  # another process, another marker
    async with open_daemon(tmp_path, {"default": a, "b": b}, TWO_LLAMAS) as daemon:
        await daemon.watch.start()
        assert props_asked(a) == props_asked(b) == 1
        state = tmp_path / "run" / "server.json"
        kept = json.loads(state.read_text())["servers"]
        assert set(kept) == {"default", "b"}
        assert state.read_bytes() == json.dumps({"servers": kept}).encode()  # byte for byte
        assert os.listdir(state.parent) == ["server.json"]  # nothing left beside it
        assert kept["default"] != kept["b"]
        on_a, on_b = session_on("main", daemon.config), session_on("other", daemon.config)
        for name in (on_a, on_b):
            await turn(daemon, name, "Hello.", resume=False)
        b.restart()
        autojump_clock.jump(FRESH_SECONDS)
        events_b: list[object] = []
        assert (await turn(daemon, on_b, "Again.", True, events_b)).content == "B."
        restarted = "the server restarted: /props media_marker changed"
        assert told(events_b) == [restarted, restarted]  # cache_cold, then the loss's cause
        assert isinstance(next(e for e in events_b if told([e])), p.CacheCold)
        assert props_asked(b) == 3  # before the request, and after its loss
        assert props_asked(a) == 1
        # b's restart is known now; a session on the other server is not told of it.
        events_a: list[object] = []
        assert (await turn(daemon, on_a, "Again.", True, events_a)).content == "A."
        assert told(events_a) == []
        assert props_asked(a) == 2
        now = json.loads(state.read_text())["servers"]
        assert now["default"] == kept["default"]
        assert now["b"] != kept["b"]


async def test_an_identity_kept_before_each_server_was_watched_is_the_first_slot_s_server_s(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a = FakeLlamaServer(default=Reply(content="A."))
    state = tmp_path / "run" / "server.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"media_marker": "an older process", "build_info": ""}))
    async with open_daemon(tmp_path, {"default": a}, "") as daemon:
        with caplog.at_level(logging.INFO, "loopd"):
            await daemon.watch.start()
    assert "llama-server restarted (/props media_marker changed)" in caplog.text
    assert set(json.loads(state.read_text())["servers"]) == {"default"}
    # Where the first slot is on another server, the identity kept was that server's.
    b = FakeLlamaServer(default=Reply(content="B."), seed=1)
    first_on_b = '[servers.b]\nbase_url = "http://b.local:8080"\n[slots]\nother = "b:0"\nmain = 0\n'
    async with open_daemon(tmp_path, {"default": a, "b": b}, first_on_b) as daemon:
        await daemon.watch.start()
    b_identity = json.loads(state.read_text())["servers"]["b"]
    state.write_text(json.dumps(b_identity))  # as the loopd before kept it
    caplog.clear()
    async with open_daemon(tmp_path, {"default": a, "b": b}, first_on_b) as daemon:
        with caplog.at_level(logging.INFO, "loopd"):
            await daemon.watch.start()
    assert "restarted" not in caplog.text


async def test_a_loss_on_the_second_server_asks_that_server_why(tmp_path: Path) -> None:
    a = FakeLlamaServer(default=Reply(content="A."))
    b = FakeLlamaServer(default=Reply(content="B."), seed=1)
    async with open_daemon(tmp_path, {"default": a, "b": b}, TWO_LLAMAS) as daemon:
        await daemon.watch.start()
        on_b = session_on("other", daemon.config)
        await turn(daemon, on_b, "Hello.", resume=False)
        b.restart()  # the next request comes at once: only the loss asks /props
        events: list[object] = []
        await turn(daemon, on_b, "Again.", True, events)
    assert told(events) == ["the server restarted: /props media_marker changed"]


async def test_each_server_s_settings_are_checked_against_its_own_slots(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a = FakeLlamaServer(n_slots=2, default=Reply(content="A."))
    b = FakeLlamaServer(default=Reply(content="B."), seed=1)  # one slot
    text = TWO_LLAMAS.replace('other = "b:0"', 'second = 1\nother = "b:2"')
    async with open_daemon(tmp_path, {"default": a, "b": b}, text) as daemon:
        with caplog.at_level(logging.WARNING, "loopd"):
            await daemon.watch.start()
    [warning] = [r.getMessage() for r in caplog.records if "past the server" in r.getMessage()]
    assert warning.startswith("llama-server b: [slots] ids [2] are past the server's 1 slot(s)")


class Silent(httpx.AsyncBaseTransport):
    """A server that takes connections and never answers."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_server_that_never_answers_holds_up_no_other_s_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    b = FakeLlamaServer(default=Reply(content="B."), seed=1)  # one slot
    config = config_in(tmp_path, TWO_LLAMAS.replace('other = "b:0"', 'other = "b:2"'))
    transports = {"default": Silent(), "b": b.mock_transport()}
    clock = TickingClock()
    async with Servers(config, transports=transports) as servers:
        daemon = Daemon(config, servers, FakeTools(clock), clock,
                        store=Store(tmp_path, clock))  # fmt: skip
        with caplog.at_level(logging.WARNING, "loopd"):
            with trio.move_on_after(config.server.connect_timeout_s):  # as loopd starts it
                await daemon.watch.start()
        daemon.close()
    assert "llama-server b: [slots] ids [2] are past the server's 1 slot(s)" in caplog.text


async def test_an_openai_server_is_neither_asked_props_nor_to_save_its_slot(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    saves = tmp_path / "saves"
    saves.mkdir()
    local = FakeLlamaServer(n_slots=2, default=Reply(content="Local."), slot_save_path=saves)
    gpu = FakeLlamaServer(kind="openai", default=Reply(content="Big."))
    text = TWO + f'[cache]\nsave_dir = "{saves}"\n'
    async with open_daemon(tmp_path, {"default": local, "gpu": gpu}, text,
                           profiles={"gpu": GPU}) as daemon:  # fmt: skip
        assert daemon.slot_cache is not None
        await daemon.watch.start()
        async with trio.open_nursery() as nursery:
            await nursery.start(daemon.slot_cache.serve)
            on_gpu = [n for n in (f"chat-{i}" for i in range(1000))
                      if slot_for(p.SessionId(n), daemon.config) == "big"][:2]  # fmt: skip
            on_main = session_on("main", daemon.config)
            for resume in (False, True):
                for name in (*on_gpu, on_main):
                    await turn(daemon, name, "Hello.", resume)
                    await trio.testing.wait_all_tasks_blocked()
                autojump_clock.jump(FRESH_SECONDS)
                if not resume:  # a save's note for a gpu session (its slot now taken)
                    said = daemon.sessions.open[p.SessionId(on_gpu[0])].request_messages()
                    note = {"tokens": 1, "messages": len(said), "prefix": prefix_hash(said),
                            "marker": ""}  # fmt: skip
                    gpu_note = daemon.slot_cache._name(on_gpu[0]) + ".json"
                    (saves / gpu_note).write_text(json.dumps(note))
            nursery.cancel_scope.cancel()
        assert daemon.slot_cache.saved == 2  # the llama-server session's two turns
    assert [path for _method, path, _headers in gpu.received] == ["/v1/chat/completions"] * 4


async def test_a_save_is_restored_after_a_restart_of_the_second_server(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    saves = tmp_path / "saves"
    saves.mkdir()
    a = FakeLlamaServer(default=Reply(content="A."), slot_save_path=saves)
    b = FakeLlamaServer(default=Reply(content="B."), slot_save_path=saves, seed=1)
    text = TWO_LLAMAS + f'[cache]\nsave_dir = "{saves}"\n'
    async with open_daemon(tmp_path, {"default": a, "b": b}, text) as daemon:
        assert daemon.slot_cache is not None
        await daemon.watch.start()
        async with trio.open_nursery() as nursery:
            await nursery.start(daemon.slot_cache.serve)
            on_b = session_on("other", daemon.config)
            await turn(daemon, on_b, "Hello.", resume=False)
            await trio.testing.wait_all_tasks_blocked()
            assert daemon.slot_cache.saved == 1
            b.restart()
            autojump_clock.jump(FRESH_SECONDS)
            events: list[object] = []
            await turn(daemon, on_b, "Again.", True, events)
            nursery.cancel_scope.cancel()
        assert daemon.slot_cache.restored == 1
        assert told(events) == []  # restored: no miss to tell
