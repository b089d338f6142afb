"""The cause of a `cache_loss`: each cause with the fake server, and the pure rules."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import pytest
import trio.testing

from boxmaker import proto as p
from boxmaker.loopd.cache import (
    FRESH_SECONDS,
    PrefixChange,
    ServerWatch,
    explain_loss,
    first_difference,
)
from boxmaker.loopd.infer import ServerIdentity, identity_of, settings_warnings
from boxmaker.loopd.loop import run_turn
from boxmaker.session import assemble_baseline
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import SYSTEM, EventLog, Rig, open_rig


def watched(rig: Rig, state: Path) -> ServerWatch:
    watch = ServerWatch(rig.runtime.client, state)
    rig.runtime = attrs.evolve(rig.runtime, watch=watch)
    return watch


async def say(rig: Rig, content: str) -> list[p.CacheLoss]:
    log = EventLog()
    await run_turn(rig.session, rig.runtime, content, log)
    return log.of(p.CacheLoss)


def losses(rig: Rig) -> list[p.CacheLossRecord]:
    return [r for r in rig.session.records if isinstance(r, p.CacheLossRecord)]


async def test_a_server_restart_is_the_cause_and_props_says_what_changed(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with open_rig(tmp_path, fake) as rig:
        watch = watched(rig, tmp_path / "server.json")
        await watch.start()
        assert await say(rig, "One.") == []
        assert await say(rig, "Two.") == []
        fake.restart()
        [event] = await say(rig, "Three.")
        assert event.cause is p.LossCause.SERVER_RESTARTED
        assert event.detail == "the server restarted: /props media_marker changed"
        [record] = losses(rig)
        assert (record.cause, record.detail) == (event.cause, event.detail)
        assert await say(rig, "Four.") == []  # the new process holds it again


async def test_a_restart_while_loopd_was_down_too_is_told_from_the_identity_kept(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    state = tmp_path / "run" / "server.json"
    async with open_rig(tmp_path, fake) as rig:
        await watched(rig, state).start()
        await say(rig, "One.")
        # loopd stops, the server restarts, a new loopd starts: only the file remembers.
        fake.restart()
        await rig.reopen()
        await watched(rig, state).start()  # the start tells it: said before the answer
        log = EventLog()
        await run_turn(rig.session, rig.runtime, "Two.", log)
        [event] = log.of(p.CacheLoss)
        assert event.cause is p.LossCause.SERVER_RESTARTED
        kinds = [type(event) for event in log.events]
        assert kinds.index(p.CacheCold) < kinds.index(p.Content)


async def test_another_session_on_the_slot_is_the_cause(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))  # one slot, no host cache
    async with open_rig(tmp_path, fake) as rig:
        watch = watched(rig, tmp_path / "server.json")
        await watch.start()
        other = rig.store.create(
            p.SessionId("chat-2"), assemble_baseline(SYSTEM + " Other.", None), "main"
        )
        await say(rig, "One.")
        await run_turn(other, rig.runtime, "Hi from the other.", EventLog())
        [event] = await say(rig, "Two.")
        assert event.cause is p.LossCause.SLOT_TAKEN
        assert event.detail == "session chat-2 used the slot since"
        other.close()


async def test_a_loss_with_nothing_else_to_blame_is_an_eviction(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with open_rig(tmp_path, fake) as rig:
        await watched(rig, tmp_path / "server.json").start()
        await say(rig, "One.")
        fake.forget(0)  # the server dropped the prefix on its own
        [event] = await say(rig, "Two.")
        assert event.cause is p.LossCause.EVICTED


async def test_without_a_watch_the_cause_is_still_decided_from_the_log(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with open_rig(tmp_path, fake) as rig:
        await say(rig, "One.")
        fake.restart()
        [event] = await say(rig, "Two.")
        assert event.cause is p.LossCause.EVICTED  # nothing told it of the restart


async def test_a_server_without_props_leaves_restarts_untold(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with open_rig(tmp_path, fake) as rig:
        watch = watched(rig, tmp_path / "server.json")
        await watch.start()
        await say(rig, "One.")
        fake.model = "other.gguf"  # same marker, another model path: a new process
        fake.forget(0)
        [event] = await say(rig, "Two.")
        assert event.detail == "the server restarted: /props model_path changed"


def props_asked(fake: FakeLlamaServer) -> int:
    return sum(path == "/props" for _method, path, _headers in fake.received)


RESTARTED = "the server restarted: /props media_marker changed"


async def after_a_restart(
    rig: Rig, clock: trio.testing.MockClock, content: str, *, new_epoch: bool = False
) -> EventLog:
    """The server restarts while loopd runs, and the next message comes `FRESH_SECONDS` later:
    its turn's events, which say the miss once (`cache_cold`) before anything else of note."""
    rig.fake.restart()
    clock.jump(FRESH_SECONDS)
    log = EventLog()
    await run_turn(rig.session, rig.runtime, content, log, new_epoch=new_epoch)
    assert log.of(p.CacheCold) == [p.CacheCold(p.LossCause.SERVER_RESTARTED, RESTARTED)]
    return log


async def test_a_restart_known_before_the_request_is_said_before_the_answer(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with open_rig(tmp_path, fake) as rig:
        await watched(rig, tmp_path / "server.json").start()
        await say(rig, "One.")
        log = await after_a_restart(rig, autojump_clock, "Two.")
        kinds = [type(event) for event in log.events]
        assert kinds.index(p.CacheCold) < kinds.index(p.Content) < kinds.index(p.CacheLoss)
        [loss] = log.of(p.CacheLoss)
        assert (loss.cause, loss.detail) == (p.LossCause.SERVER_RESTARTED, RESTARTED)
        log = EventLog()
        autojump_clock.jump(FRESH_SECONDS)
        await run_turn(rig.session, rig.runtime, "Three.", log)
        assert log.of(p.CacheCold) == log.of(p.CacheLoss) == []  # said once


async def test_requests_in_a_row_do_not_ask_props_and_a_new_session_is_not_told(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with open_rig(tmp_path, fake) as rig:
        await watched(rig, tmp_path / "server.json").start()
        for word in ("One.", "Two.", "Three."):
            await say(rig, word)
        assert props_asked(fake) == 1  # at start only: nothing on the way of a hit
        fake.restart()
        autojump_clock.jump(FRESH_SECONDS)
        other = rig.store.create(
            p.SessionId("chat-2"), assemble_baseline(SYSTEM + " Other.", None), "main"
        )
        log = EventLog()
        await run_turn(other, rig.runtime, "Hi.", log)  # its first request: no prefix to lose
        other.close()
        assert props_asked(fake) == 2
        assert log.of(p.CacheCold) == log.of(p.CacheLoss) == []


# --- the pure rules ---------------------------------------------------------------------------


def test_first_difference_names_the_message_and_the_byte() -> None:
    before = (p.SystemMessage("Be brief."), p.UserMessage("Hello there."))
    assert first_difference(before, (*before, p.UserMessage("More."))) is None
    changed = (p.SystemMessage("Be brief."), p.UserMessage("Hello where."))
    # {"role":"user","content":"Hello where."}: the 'w' is byte 32.
    assert first_difference(before, changed) == PrefixChange(message=1, offset=32)
    assert first_difference(before, before[:1]) == PrefixChange(message=1, offset=0)


def test_causes_are_taken_in_order_and_a_changed_prefix_wins() -> None:
    change = PrefixChange(message=3, offset=17)
    cause, detail = explain_loss(change, "/props media_marker changed", "session b")
    assert cause is p.LossCause.PREFIX_CHANGED
    assert detail.startswith("message 3 differs from the previous request at byte 17")
    assert explain_loss(None, "x", "session b")[0] is p.LossCause.SERVER_RESTARTED
    assert explain_loss(None, None, "session b")[0] is p.LossCause.SLOT_TAKEN
    assert explain_loss(None, None, None)[0] is p.LossCause.EVICTED


def test_an_identity_is_read_only_from_props_with_a_marker() -> None:
    assert identity_of({"build_info": "b1"}) is None
    assert identity_of(["not", "props"]) is None
    one = identity_of({"media_marker": "m" * 10_000, "build_info": 7})
    assert one == ServerIdentity("m" * 4096, "", "")
    assert one.changed_from(ServerIdentity("m" * 4096, "", "")) is None


# --- the server's settings --------------------------------------------------------------------


def test_settings_that_lose_prefixes_are_named_from_props() -> None:
    assert settings_warnings({"total_slots": 4, "is_sleeping": False}, [0, 3]) == []
    [past] = settings_warnings({"total_slots": 2}, [0, 2, 5])
    assert past.startswith("[slots] ids [2, 5] are past the server's 2 slot(s)")
    assert past.endswith("start llama-server with -np 6")
    [asleep] = settings_warnings({"total_slots": 1, "is_sleeping": True}, [0])
    assert "--sleep-idle-seconds" in asleep
    assert settings_warnings("not props", [9]) == []


async def test_loopd_warns_at_start_and_once_at_a_loss_no_restart_explains(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))  # one slot
    async with open_rig(tmp_path, fake, "[slots]\nmain = 0\nsecond = 1\n") as rig:
        watch = ServerWatch(rig.runtime.client, tmp_path / "server.json")
        rig.runtime = attrs.evolve(rig.runtime, watch=watch)
        with caplog.at_level(logging.WARNING, "loopd"):
            await watch.start()
            assert "[slots] ids [1] are past the server's 1 slot(s)" in caplog.text
            await say(rig, "One.")
            for word in ("Two.", "Three."):
                fake.forget(0)
                await say(rig, word)
        lost = [r for r in caplog.records if "without a restart" in r.getMessage()]
        assert len(lost) == 1
        assert "[cache] save_dir" in lost[0].getMessage()


async def test_a_server_still_loading_at_start_is_identified_at_the_first_request(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."), loading=True)
    async with open_rig(tmp_path, fake) as rig:
        watch = watched(rig, tmp_path / "server.json")
        await watch.start()  # 503: nothing learnt
        assert watch.identity("main") is None
        fake.loading = False
        await say(rig, "One.")
        fake.restart()
        [event] = await say(rig, "Two.")
        assert event.cause is p.LossCause.SERVER_RESTARTED


async def test_a_restart_before_an_epoch_s_summary_is_said_before_the_new_epoch(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))
    async with open_rig(tmp_path, fake) as rig:
        await watched(rig, tmp_path / "server.json").start()
        await say(rig, "One.")
        await say(rig, "Two.")
        log = await after_a_restart(rig, autojump_clock, "Three.", new_epoch=True)
        kinds = [type(event) for event in log.events]
        assert kinds.index(p.CacheCold) < kinds.index(p.EpochStart) < kinds.index(p.Content)
        assert log.of(p.CacheLoss) == []  # the new epoch's first request had nothing to lose
