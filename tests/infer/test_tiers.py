"""Tiers at the servers: a client for each tier's server (found by name), the chat tier
deciding where new sessions go while each session made before keeps its slot and server, and
a tier's slot id past the server's slots warned of at start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.loopd.infer import InferError, Servers
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from .test_servers import GPU, TWO, config_in, open_daemon, turn

CHAT_ON_GPU = TWO + '[tiers]\nchat = "gpu"\n'
EYE = '[servers.eye]\nbase_url = "http://eye.local:8080"\n[tiers]\nvision = "eye"\n'


async def test_a_tier_s_server_has_a_client_found_by_name_and_by_purpose(tmp_path: Path) -> None:
    config = config_in(tmp_path, TWO + EYE)
    async with Servers(config) as servers:
        assert list(servers.clients) == ["default", "gpu", "eye"]
        assert servers.client("eye") is servers.tier("vision")
        assert servers.tier("summary") is None
        assert servers.client("eye").tiers == {"vision": None}
        assert servers.client("default").tiers == {}
        with pytest.raises(InferError, match="no slot or tier of the config is on a server named"):
            servers.client("nowhere")


async def test_new_sessions_go_to_the_chat_tier_and_older_ones_keep_their_server(
    tmp_path: Path,
) -> None:
    local = FakeLlamaServer(n_slots=2, default=Reply(content="Local."))
    gpu = FakeLlamaServer(kind="openai", default=Reply(content="Big."))
    fakes = {"default": local, "gpu": gpu}
    older = [f"s{n}" for n in range(12)]
    async with open_daemon(tmp_path, fakes, profiles={"gpu": GPU}) as daemon:
        for name in older:
            await turn(daemon, name, "Hello.", resume=False)
    pinned = {name: daemon.store.resume(p.SessionId(name)) for name in older}
    slots = {name: session.slot for name, session in pinned.items()}
    for session in pinned.values():
        session.close()
    assert set(slots.values()) == {"main", "second", "big"}
    async with open_daemon(tmp_path, fakes, CHAT_ON_GPU, profiles={"gpu": GPU}) as daemon:
        for name in older:  # each on its own server, as it was made
            answer = await turn(daemon, name, "Again.", resume=True)
            assert answer.content == ("Big." if slots[name] == "big" else "Local."), name
        for n in range(6):
            assert (await turn(daemon, f"new{n}", "Hello.", resume=False)).content == "Big."
    on_gpu = sum(slot == "big" for slot in slots.values())
    assert len(gpu.requests[0]) == 2 * on_gpu + 6
    assert sum(len(bodies) for bodies in local.requests.values()) == 2 * (12 - on_gpu)


async def test_a_tier_s_slot_past_the_server_s_slots_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    local = FakeLlamaServer(default=Reply(content="Local."))  # one slot: a tier's 1 is 0 there
    text = '[tiers]\nsummary = "default:1"\n'
    async with open_daemon(tmp_path, {"default": local}, text) as daemon:
        with caplog.at_level(logging.WARNING, "loopd"):
            await daemon.watch.start()
    assert "[tiers] slot ids [1] are past the server's 1 slot(s)" in caplog.text
    assert "[slots] ids" not in caplog.text
