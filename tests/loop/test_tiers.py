"""`[tiers] summary`: an epoch's summary (and its merges) asked of a second server, as a
conversation of its own, when its context holds it; the session's own server and slot left as
the epoch's last turn left them; the session's server used instead when the tier is too small,
fails, or is the session's own server; and every such session replayed identically."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.loopd.infer import Servers
from boxmaker.loopd.loop import Runtime, run_turn
from boxmaker.session import MERGE_INSTRUCTION, SUMMARY_INSTRUCTION, assemble_baseline
from boxmaker.store import Store
from boxmaker.testing import FakeTools
from boxmaker.testing._render import render
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply

from ..helpers import SYSTEM, EventLog, Rig, make_config, read_epochs, replays_identical
from .test_epochs import FILL, N_CTX, SUMMARY, filled
from .test_history import summarize

SMALL = '[servers.small]\nbase_url = "http://small.local:8080"\n'
TIER = SMALL + '[tiers]\nsummary = "small"\n'
INSTRUCTION = {"role": "user", "content": SUMMARY_INSTRUCTION}


@asynccontextmanager
async def open_tiered(
    home: Path, fakes: dict[str, FakeLlamaServer], text: str = TIER
) -> AsyncIterator[Rig]:
    """A session on `main` of the `default` fake, with a runtime over every server of the
    config (each its fake); replayed identically when the test ends."""
    config = make_config(text, home)
    clock = TickingClock()
    store = Store(home, clock)
    session = store.create(p.SessionId("chat-1"), assemble_baseline(SYSTEM, None), "main")
    transports = {name: fake.mock_transport() for name, fake in fakes.items()}
    async with Servers(config, transports=transports, rng=random.Random(0)) as servers:
        tools = FakeTools(clock)
        rig = Rig(store, session, Runtime(config, servers, tools, clock), tools, fakes["default"])
        try:
            yield rig
        finally:
            rig.session.close()
    await replays_identical(session.log_path.parent, config)


async def turn(rig: Rig, content: str, **kwargs: Any) -> EventLog:
    log = EventLog()
    await run_turn(rig.session, rig.runtime, content, log, **kwargs)
    return log


def extends(later: dict[str, Any], earlier: dict[str, Any]) -> bool:
    """Whether a request's messages start with an earlier one's, as JSON values."""
    return later["messages"][: len(earlier["messages"])] == earlier["messages"]


def asked_to_summarize(fake: FakeLlamaServer) -> list[dict[str, Any]]:
    said = [body for bodies in fake.requests.values() for body in bodies]
    return [body for body in said if body["messages"][-1] == INSTRUCTION]


async def test_the_summary_is_asked_of_the_tier_and_the_session_s_slot_is_left_as_it_was(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(
        script=[*FILL, Reply(content="Four."), Reply(content="Five.")], n_ctx=N_CTX
    )
    held_then: list[list[str]] = []  # the session's slot, when the tier is asked

    def watch(_body: dict[str, Any]) -> None:
        held_then.append(fake.slot_tokens(0))

    small = FakeLlamaServer(script=[SUMMARY], n_ctx=4096, responder=watch, seed=1)
    async with open_tiered(tmp_path, {"default": fake, "small": small}) as rig:
        await filled(rig)  # type: ignore[arg-type]
        held = fake.slot_tokens(0)
        log = await turn(rig, "four")
        [started] = log.of(p.EpochStart)
        assert started.summary_tokens == 8  # type: ignore[attr-defined]
        # The tier read the epoch as a conversation of its own: the session's messages up to
        # the carried turns, the instruction, no slot of its own named (none is a session's).
        [asked] = small.requests[0]
        one, two, three, four = fake.requests[0]
        assert asked["messages"][:-1] == three["messages"][: len(asked["messages"]) - 1]
        assert asked["messages"][-1] == INSTRUCTION
        assert "id_slot" not in asked
        assert asked["tools"] == three["tools"]
        assert asked["max_tokens"] == N_CTX // 8  # the cap of the session's context
        end = read_epochs(rig.store.folder(rig.session.id))[0][-1]
        assert isinstance(end, p.EpochEndRecord)
        assert (end.summary, end.cache_n, end.prompt_n) == (
            SUMMARY.content,
            0,
            len(render(asked)),
        )  # no cache there: the whole request read
        # The session's server saw no summary; its slot held the third turn while the tier
        # worked, and each request of an epoch extends the one before.
        assert held_then == [held]
        assert asked_to_summarize(fake) == []
        assert extends(two, one)
        assert extends(three, two)
        assert rig.session.epoch == 1
        usage = rig.session.last_usage()
        assert usage is not None
        assert usage.cache_n <= 557 < usage.cache_n + usage.prompt_n  # the one expected miss
        log = await turn(rig, "five")
        assert extends(fake.requests[0][-1], four)
        assert log.of(p.CacheLoss) == []
        after = rig.session.last_usage()
        assert after is not None
        assert after.cache_n >= usage.cache_n + usage.prompt_n + usage.predicted_n - 1


async def test_a_tier_too_small_for_the_epoch_leaves_the_summary_to_the_session_s_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLlamaServer(script=[*FILL, SUMMARY, Reply(content="Four.")], n_ctx=N_CTX)
    small = FakeLlamaServer(default=Reply(content="Never."), n_ctx=600, seed=1)
    async with open_tiered(tmp_path, {"default": fake, "small": small}) as rig:
        await filled(rig)  # type: ignore[arg-type]
        three = fake.requests[0][-1]
        with caplog.at_level(logging.INFO, "loopd"):
            await turn(rig, "four")
        assert rig.session.epoch == 1
    assert small.requests == {}  # not even tried: it cannot hold the epoch
    [asked] = asked_to_summarize(fake)  # a prefix of the session's slot, as without a tier
    assert asked["messages"][:-1] == three["messages"][: len(asked["messages"]) - 1]
    assert asked["id_slot"] == 0
    said = "server small's context (600 tokens) does not hold a summary request of about"
    assert said in caplog.text
    assert "the session's server is used" in caplog.text


async def test_a_tier_that_fails_leaves_the_summary_to_the_session_s_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLlamaServer(script=[*FILL, SUMMARY, Reply(content="Four.")], n_ctx=N_CTX)
    small = FakeLlamaServer(script=[Fault(FaultKind.SERVER_ERROR)], n_ctx=4096, seed=1)
    async with open_tiered(tmp_path, {"default": fake, "small": small}) as rig:
        await filled(rig)  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, "loopd"):
            log = await turn(rig, "four")
        assert log.of(p.EpochStart)[0].summary_tokens == 8  # type: ignore[attr-defined]
    assert len(small.requests[0]) == 1  # a 500 is not retried
    assert len(asked_to_summarize(fake)) == 1
    assert "the summary tier, server small, failed" in caplog.text


async def test_a_tier_on_the_session_s_own_server_leaves_it_its_slot_s_prefix(
    tmp_path: Path,
) -> None:
    # `default:1` is the tier's own slot, which a session on another server would use; a
    # session on `default` reads the prefix its own slot holds instead (the cheaper way).
    fake = FakeLlamaServer(script=[*FILL, SUMMARY, Reply(content="Four.")], n_ctx=N_CTX, n_slots=2)
    text = '[tiers]\nsummary = "default:1"\n'
    async with open_tiered(tmp_path, {"default": fake}, text) as rig:
        await filled(rig)  # type: ignore[arg-type]
        await turn(rig, "four")
    assert 1 not in fake.requests
    assert len(asked_to_summarize(fake)) == 1


async def test_a_tier_s_own_slot_on_a_server_that_holds_a_session_s_slot_is_the_one_asked(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[*FILL, Reply(content="Four.")], n_ctx=N_CTX)
    small = FakeLlamaServer(script=[SUMMARY], n_ctx=4096, n_slots=2, seed=1)
    text = SMALL + '[slots]\nmain = 0\nother = "small:0"\n[tiers]\nsummary = "small:1"\n'
    async with open_tiered(tmp_path, {"default": fake, "small": small}, text) as rig:
        await filled(rig)  # type: ignore[arg-type]
        await turn(rig, "four")
    assert list(small.requests) == [1]  # slot 0, `other`'s, untouched
    assert small.requests[1][0]["id_slot"] == 1


async def test_merges_of_summaries_are_asked_of_the_tier_too(tmp_path: Path) -> None:
    made: list[str] = []
    fake = FakeLlamaServer(default=Reply(content="Noted."), n_ctx=2048)
    small = FakeLlamaServer(n_ctx=8192, responder=lambda body: summarize(body, made), seed=1)
    async with open_tiered(tmp_path, {"default": fake, "small": small}) as rig:
        for n in range(21):
            await turn(rig, f"Message {n} about the rain.", new_epoch=n > 0 and n % 2 == 0)
        assert rig.session.epoch == 10
    assert made.count("summary") == 10
    assert "merge" in made
    said = [body["messages"][-1]["content"] for body in fake.requests[0]]
    assert not [text for text in said if text == SUMMARY_INSTRUCTION
                or text.startswith(MERGE_INSTRUCTION)]  # fmt: skip
    assert len(small.requests[0]) == len(made)
