"""Sessions that survive a server restart: the slot saved after a turn, restored
before a turn whose prefix the server lost, with the fake's slot actions; every failure a
warning and a normal turn."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.loopd.cache import Saved, ServerWatch, SlotCache
from boxmaker.loopd.infer import ProtocolError
from boxmaker.loopd.loop import run_turn
from boxmaker.session import assemble_baseline
from boxmaker.store import OpenSession
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import SYSTEM, EventLog, Rig, open_rig


@asynccontextmanager
async def cached(
    tmp_path: Path, fake: FakeLlamaServer, max_bytes: int = 1 << 30
) -> AsyncIterator[tuple[Rig, SlotCache]]:
    saves = tmp_path / "saves"
    saves.mkdir(exist_ok=True)
    async with open_rig(tmp_path, fake) as rig:
        watch = ServerWatch(rig.runtime.client, tmp_path / "run" / "server.json")
        cache = SlotCache(rig.runtime.client, watch, saves, max_bytes)
        rig.runtime = attrs.evolve(rig.runtime, watch=cache)
        await watch.start()
        async with trio.open_nursery() as nursery:
            await nursery.start(cache.serve)
            yield rig, cache
            nursery.cancel_scope.cancel()


async def say(
    rig: Rig,
    cache: SlotCache,
    content: str,
    session: OpenSession | None = None,
    events: EventLog | None = None,
) -> p.Usage:
    """A turn as the daemon runs it: then the save is asked for, and done."""
    session = session or rig.session
    outcome = await run_turn(session, rig.runtime, content, events or EventLog())
    usage = outcome.usage
    cache.after_turn(str(session.id), session.slot, session.request_messages(),
                     usage.cache_n + usage.prompt_n)  # fmt: skip
    await trio.testing.wait_all_tasks_blocked()
    return usage


def edit_save(tmp_path: Path, **changes: object) -> dict[str, object]:
    """Change the note beside the one save; what it held before."""
    [meta] = (tmp_path / "saves").glob("*.json")
    raw: dict[str, object] = json.loads(meta.read_text())
    meta.write_text(json.dumps({**raw, **changes}))
    return raw


def losses(session: OpenSession) -> list[p.CacheLossRecord]:
    return [r for r in session.records if isinstance(r, p.CacheLossRecord)]


def fake_with_saves(tmp_path: Path) -> FakeLlamaServer:
    return FakeLlamaServer(
        default=Reply(content="Fine, thanks."), slot_save_path=tmp_path / "saves"
    )


async def test_after_a_restart_the_next_turn_processes_only_its_new_tokens(tmp_path: Path) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        second = await say(rig, cache, "Two.")
        assert cache.saved == 2
        fake.restart()
        assert fake.slot_tokens(0) == []
        events = EventLog()
        third = await say(rig, cache, "Three.", events=events)
        assert cache.restored == 1
        assert losses(rig.session) == []
        assert events.of(p.CacheCold) == []  # nothing to say: restored
        # Only the new user message and the generation prompt were processed.
        assert third.cache_n >= second.cache_n + second.prompt_n
        assert third.prompt_n < 10


async def test_the_note_beside_a_save_is_the_json_it_always_was(tmp_path: Path) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        [meta] = (tmp_path / "saves").glob("*.json")
        raw = json.loads(meta.read_bytes())
        assert list(raw) == ["tokens", "messages", "prefix", "marker"]
        assert meta.read_bytes() == json.dumps(raw).encode()  # Python's form, byte for byte
        assert sorted(os.listdir(tmp_path / "saves")) == sorted([meta.name, f"{meta.stem}.bin"])
        assert Saved.read(meta) == Saved(**raw)


def test_a_note_of_another_shape_is_no_save(tmp_path: Path) -> None:
    meta = tmp_path / "note.json"
    good = {"tokens": 5, "messages": 2, "prefix": "0" * 64, "marker": "m"}
    meta.write_text(json.dumps(good))
    assert Saved.read(meta) == Saved(**good)  # type: ignore[arg-type]
    for bad in ({**good, "tokens": -1}, {**good, "messages": True}, {**good, "prefix": 5},
                {**good, "more": 1}, {"tokens": 5}, [], "x"):  # fmt: skip
        meta.write_text(json.dumps(bad))
        assert Saved.read(meta) is None, bad
    assert Saved.read(tmp_path / "gone.json") is None


async def test_without_a_restart_or_another_session_nothing_is_restored(tmp_path: Path) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        await say(rig, cache, "Two.")
        assert cache.restored == 0
        slot_actions = [path for _m, path, _h in fake.received if path.startswith("/slots/")]
        assert slot_actions == ["/slots/0", "/slots/0"]  # the two saves


async def test_another_session_on_the_slot_is_undone_by_a_restore(tmp_path: Path) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        other = rig.store.create(
            p.SessionId("chat-2"), assemble_baseline(SYSTEM + " Other.", None), "main"
        )
        await say(rig, cache, "One.")
        await say(rig, cache, "Hi.", other)
        await say(rig, cache, "Two.")
        assert cache.restored == 1
        assert losses(rig.session) == []
        other.close()


async def test_a_save_for_another_prefix_is_never_restored(tmp_path: Path) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        edit_save(tmp_path, prefix="0" * 64)
        fake.restart()
        await say(rig, cache, "Two.")
        assert cache.restored == 0
        [loss] = losses(rig.session)
        assert loss.cause is p.LossCause.SERVER_RESTARTED


async def test_a_save_with_more_messages_than_the_request_is_never_restored(
    tmp_path: Path,
) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        edit_save(tmp_path, messages=99)
        fake.restart()
        await say(rig, cache, "Two.")
        assert cache.restored == 0


async def test_a_broken_save_file_is_a_warning_and_a_normal_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        [blob] = (tmp_path / "saves").glob("*.bin")
        blob.write_bytes(b"not a slot file")
        fake.restart()
        events = EventLog()
        with caplog.at_level(logging.WARNING, "loopd"):
            usage = await say(rig, cache, "Two.", events=events)
        assert cache.restored == 0
        assert usage.cache_n == 0  # the whole prompt, as without saves
        [cold] = events.of(p.CacheCold)  # the restore failed: the miss is said before
        assert cold.cause is p.LossCause.SERVER_RESTARTED
        assert "slot main restore answered 400" in caplog.text
        assert "invalid slot save file" in caplog.text
        assert [loss.cause for loss in losses(rig.session)] == [p.LossCause.SERVER_RESTARTED]


async def test_a_restore_of_the_wrong_size_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        saved = edit_save(tmp_path)
        edit_save(tmp_path, tokens=int(str(saved["tokens"])) + 1)
        fake.restart()
        with caplog.at_level(logging.WARNING, "loopd"):
            await say(rig, cache, "Two.")
        assert cache.restored == 0
        assert "its save had" in caplog.text


async def test_a_server_without_a_save_folder_is_a_warning_and_turns_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Fine."))  # no --slot-save-path: 501
    async with cached(tmp_path, fake) as (rig, cache):
        with caplog.at_level(logging.WARNING, "loopd"):
            await say(rig, cache, "One.")
            await say(rig, cache, "Two.")
        assert cache.saved == 0
        assert "slot main save answered 501" in caplog.text
        assert "--slot-save-path" in caplog.text
        assert list((tmp_path / "saves").glob("*.json")) == []


async def test_past_max_bytes_the_least_recently_used_save_goes(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        n_slots=2, default=Reply(content="Fine, thanks."), slot_save_path=tmp_path / "saves"
    )
    async with cached(tmp_path, fake, max_bytes=6000) as (rig, cache):
        other = rig.store.create(
            p.SessionId("chat-2"), assemble_baseline(SYSTEM + " Other.", None), "main"
        )
        await say(rig, cache, "One.")
        first = {m.name for m in (tmp_path / "saves").glob("*.json")}
        [blob] = (tmp_path / "saves").glob("*.bin")
        assert 3000 < blob.stat().st_size <= 6000  # one fits, two do not
        await say(rig, cache, "Hello there, second session.", other)
        kept = {m.name for m in (tmp_path / "saves").glob("*.json")}
        assert len(kept) == 1
        assert kept.isdisjoint(first)  # the older went
        sizes = sum(b.stat().st_size for b in (tmp_path / "saves").glob("*.bin"))
        assert sizes <= 6000
        other.close()


async def test_no_save_is_made_while_a_request_holds_the_slot(tmp_path: Path) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        assert cache.saved == 1
        async with rig.runtime.client.gates["main"]:  # a request of another turn
            cache.after_turn("chat-1", "main", rig.session.request_messages(), 0)
            await trio.testing.wait_all_tasks_blocked()
        assert cache.saved == 1


async def test_after_a_restore_a_later_loss_is_not_blamed_on_the_restart(tmp_path: Path) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        await say(rig, cache, "One.")
        fake.restart()
        await say(rig, cache, "Two.")
        assert cache.restored == 1
        fake.forget(0)
        await say(rig, cache, "Three.")
        assert [loss.cause for loss in losses(rig.session)] == [p.LossCause.EVICTED]


def epoch_end(rig: Rig) -> p.EpochEndRecord:
    """The `epoch_end` record of the session's first epoch."""
    lines = (rig.store.folder(rig.session.id) / "0.jsonl").read_text().splitlines()
    record = p.loads(p.LogRecord, lines[-1][: lines[-1].index(',"seq"')] + "}")
    assert isinstance(record, p.EpochEndRecord)
    return record


async def test_an_epoch_s_summary_after_a_restart_reuses_the_restored_conversation(
    tmp_path: Path,
) -> None:
    fake = fake_with_saves(tmp_path)
    async with cached(tmp_path, fake) as (rig, cache):
        for word in ("One.", "Two.", "Three."):
            await say(rig, cache, word)
        fake.restart()
        events = EventLog()
        await run_turn(rig.session, rig.runtime, "Four.", events, new_epoch=True)
        assert cache.restored == 1  # before the summary request, the first of the turn
        end = epoch_end(rig)
        assert end.carried_turns > 0  # the summary stops short of the saved conversation
        # The server reused what the summary shares with the restored conversation: only
        # the summary's instruction was new to it.
        assert end.cache_n > 3 * end.prompt_n > 0
        assert events.of(p.CacheCold) == []
        assert [type(e) for e in events.events].count(p.EpochStart) == 1


async def test_a_save_whose_connection_closed_before_its_answer_is_asked_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The real server sometimes closes a kept-alive connection just as a save is sent on it,
    # right after a completion: the save is asked once more, on a new connection.
    async with cached(tmp_path, fake_with_saves(tmp_path)) as (rig, cache):
        client = rig.runtime.client
        real = client.call_json
        closed: list[str] = []

        async def once_closed(method: str, path: str, body: object = None) -> object:
            if "action=save" in path and not closed:
                closed.append(path)
                raise ProtocolError("the connection closed before [DONE]: gone", cut=True)
            return await real(method, path, body)

        client.call_json = once_closed  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, "loopd"):
            await say(rig, cache, "One.")
        assert closed == ["/slots/0?action=save"]
        assert cache.saved == 1
        assert "save failed" not in caplog.text
