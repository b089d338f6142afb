"""A log changed under an open session, and folders that are not sessions: nothing
acknowledged goes to a file that is not the log, and no id is ever wedged."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.loopd.service import Daemon
from boxmaker.session import NoSuchSession, SessionError, TornLog, assemble_baseline
from boxmaker.store import Store
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..daemon.test_service import S1, connect, error_of, one_turn, open_daemon, turn

BASELINE = assemble_baseline("You are Boxmaker, in a test.\n", None)


def contents(log: Path) -> list[str]:
    return [r["content"] for r in map(json.loads, log.read_text().splitlines()) if "content" in r]


async def change_during_a_turn(
    daemon: Daemon, fake: FakeLlamaServer, change: Callable[[Path], None]
) -> p.WireError:
    """Run a turn of s1 and `change` its log while the turn waits for the server (its user
    record written, its answer not yet); the turn's final frame."""
    fake.hold(0)
    async with connect(daemon) as peer:
        await peer.send(turn(resume=True, content="Lost?"))
        assert await peer.next() == p.TurnEventFrame(p.Waiting(slot_busy=0))
        change(daemon.store.folder(S1) / "0.jsonl")
        fake.release(0)
        return await error_of(await peer.until_final())


def editor_save(log: Path) -> None:
    """What an editor does: write a copy, rename it over the file."""
    copy = log.with_name(".0.jsonl.swp")
    copy.write_bytes(log.read_bytes())
    os.chmod(copy, 0o600)
    os.rename(copy, log)


async def test_an_editor_saving_over_the_log_mid_turn_ends_it_and_the_next_reads_the_file(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        await one_turn(daemon, turn(content="First."))  # the session is open
        log = daemon.store.folder(S1) / "0.jsonl"
        error = await change_during_a_turn(daemon, fake, editor_save)
        assert error.code is p.ErrorCode.INTERNAL
        assert f"{log} was replaced by another file" in error.message
        assert "nothing was appended" in error.message
        saved = log.read_bytes()
        done = await one_turn(daemon, turn(resume=True, content="Kept."))
        assert isinstance(done[-1], p.TurnDoneFrame)
        assert log.read_bytes().startswith(saved)  # the turn went on in the saved file
    assert contents(log) == ["First.", "ok", "Lost?", "Kept.", "ok"]


async def test_an_editor_saving_over_the_log_between_turns_is_read_by_the_next(
    tmp_path: Path,
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        await one_turn(daemon, turn(content="First."))
        log = daemon.store.folder(S1) / "0.jsonl"
        editor_save(log)
        done = await one_turn(daemon, turn(resume=True, content="Kept."))
        assert isinstance(done[-1], p.TurnDoneFrame)
    assert contents(log) == ["First.", "ok", "Kept.", "ok"]


async def test_a_log_removed_mid_turn_ends_it_and_the_id_is_not_wedged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        await one_turn(daemon, turn(content="First."))
        folder = daemon.store.folder(S1)
        error = await change_during_a_turn(daemon, fake, Path.unlink)
        assert error.code is p.ErrorCode.INTERNAL
        assert "0.jsonl was removed" in error.message
        missing = await error_of(await one_turn(daemon, turn(resume=True)))
        assert missing.code is p.ErrorCode.NO_SUCH_SESSION
        done = await one_turn(daemon, turn(resume=False, content="Anew."))
        assert isinstance(done[-1], p.TurnDoneFrame)
    assert contents(folder / "0.jsonl") == ["Anew.", "ok"]
    (aside,) = [n for n in os.listdir(tmp_path / "sessions") if n.startswith(".aside-s1-")]
    assert "0.baseline.json" in os.listdir(tmp_path / "sessions" / aside)  # kept
    assert f"what it held is kept in {tmp_path / 'sessions' / aside}" in caplog.text


def cut(log: Path) -> None:
    os.truncate(log, log.stat().st_size - 10)


async def test_a_log_cut_mid_turn_ends_the_turn_and_the_next_resumes_from_the_cut(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        await one_turn(daemon, turn(content="First."))
        log = daemon.store.folder(S1) / "0.jsonl"
        sizes: list[int] = []

        def measure_and_cut(path: Path) -> None:
            sizes.append(path.stat().st_size)
            cut(path)

        error = await change_during_a_turn(daemon, fake, measure_and_cut)
        (size,) = sizes
        assert error.code is p.ErrorCode.INTERNAL
        assert f"{log} was cut from {size} to {size - 10} bytes" in error.message
        assert log.stat().st_size == size - 10  # nothing written after the cut
        whole_before = log.read_bytes()
        done = await one_turn(daemon, turn(resume=True, content="After."))
        assert isinstance(done[-1], p.TurnDoneFrame)
    # The cut write (the user record of the turn that failed) went aside, resume's rule for a
    # torn last write, and the turn went on from the write before it.
    (torn,) = log.parent.glob("0.jsonl.torn-*")
    offset = int(torn.name.rsplit("-", 1)[1])
    assert torn.read_bytes() == whole_before[offset:]
    assert contents(log) == ["First.", "ok", "After.", "ok"]


async def test_a_log_cut_between_turns_is_read_again_by_the_next(tmp_path: Path) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        await one_turn(daemon, turn(content="First."))
        log = daemon.store.folder(S1) / "0.jsonl"
        whole = log.read_bytes()
        cut(log)
        done = await one_turn(daemon, turn(resume=True, content="After."))
        assert isinstance(done[-1], p.TurnDoneFrame)
    (torn,) = log.parent.glob("0.jsonl.torn-*")
    offset = int(torn.name.rsplit("-", 1)[1])
    assert torn.read_bytes() == whole[offset:-10]
    assert log.read_bytes().startswith(whole[:offset])
    assert contents(log)[0] == "First."
    assert contents(log)[-2:] == ["After.", "ok"]


async def test_a_log_written_by_something_else_is_not_appended_to(tmp_path: Path) -> None:
    store = Store(tmp_path, TickingClock())
    session = store.create(S1, BASELINE, "main")
    try:
        with session.log_path.open("ab") as other:
            other.write(b'{"type":"user","time":"2026-11-29T21:31:35.000000Z","content":"x"}\n')
        before = session.log_path.read_bytes()
        with pytest.raises(SessionError, match=r"grew from \d+ to \d+ bytes written by something"):
            session.append(p.UserRecord(time=p.Timestamp.parse("2026-11-29T21:31:36.000000Z"),
                                              content="mine"))  # fmt: skip
        assert session.log_path.read_bytes() == before
    finally:
        session.close()


# --- folders that are not sessions --------------------------------------------------------------


@pytest.mark.parametrize("left", [[], ["0.baseline.json"], ["0.baseline.json", "0.jsonl.torn-9"]])
async def test_a_folder_without_a_log_is_no_session_and_create_makes_one(
    tmp_path: Path, left: list[str]
) -> None:
    folder = tmp_path / "sessions" / S1.value
    folder.mkdir(parents=True)
    for name in left:
        (folder / name).write_bytes(b"what was there\n")
    store = Store(tmp_path, TickingClock())
    assert not store.exists(S1)
    with pytest.raises(NoSuchSession):
        store.resume(S1)
    created = store.create(S1, BASELINE, "main")  # not SessionExists: not wedged
    created.close()
    assert store.exists(S1)
    (store.resume(S1)).close()
    if left:
        assert created.remains is not None
        assert sorted(os.listdir(created.remains)) == sorted(left)
    else:
        assert created.remains is None
        assert os.listdir(tmp_path / "sessions") == [S1.value]


async def test_a_log_line_nested_a_thousand_deep_is_refused_naming_file_and_line(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path, TickingClock())
    (store.create(S1, BASELINE, "main")).close()
    log = store.folder(S1) / "0.jsonl"
    deep = b'{"type":"user","time":"2026-11-29T21:31:35.000000Z","content":' + b"[" * 1000
    with log.open("ab") as out:
        out.write(deep + b"]" * 1000 + b"}\n")
        out.write(b'{"type":"user","time":"2026-11-29T21:31:36.000000Z","content":"x"}\n')
    with pytest.raises(
        TornLog, match=rf"{log}, line 2: not a log record: .*nested deeper than 100"
    ):
        store.resume(S1)
