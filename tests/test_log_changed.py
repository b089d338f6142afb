"""A log changed under an open session, and folders that are not sessions (issue 15): nothing
acknowledged goes to a file that is not the log, and no id is ever wedged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.session import LogChanged, NoSuchSession, TornLog, assemble_baseline
from boxmaker.store import Store
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from .test_daemon import S1, error_of, one_turn, open_daemon, turn

BASELINE = assemble_baseline("You are Boxmaker, in a test.\n", None)


def contents(log: Path) -> list[str]:
    return [r["content"] for r in map(json.loads, log.read_text().splitlines()) if "content" in r]


async def test_an_editor_saving_over_the_log_ends_the_turn_and_the_next_reads_the_file(
    tmp_path: Path,
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        await one_turn(daemon, turn(content="First."))  # the session is open
        log = daemon.store.folder(S1) / "0.jsonl"
        saved = log.read_bytes()
        copy = log.with_name(".0.jsonl.swp")  # what an editor does: write a copy, rename it
        copy.write_bytes(saved)
        os.chmod(copy, 0o600)
        os.rename(copy, log)
        error = await error_of(await one_turn(daemon, turn(resume=True, content="Lost?")))
        assert error.code is p.ErrorCode.INTERNAL
        assert f"{log} was replaced by another file" in error.message
        assert "nothing was appended" in error.message
        assert log.read_bytes() == saved
        done = await one_turn(daemon, turn(resume=True, content="Kept."))
        assert isinstance(done[-1], p.TurnDoneFrame)
    assert contents(log) == ["First.", "ok", "Kept.", "ok"]  # in the file, after a "restart"


async def test_a_removed_log_ends_the_turn_and_the_id_is_not_wedged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        await one_turn(daemon, turn(content="First."))
        folder = daemon.store.folder(S1)
        (folder / "0.jsonl").unlink()
        error = await error_of(await one_turn(daemon, turn(resume=True, content="Lost?")))
        assert error.code is p.ErrorCode.INTERNAL
        assert "0.jsonl was removed" in error.message
        missing = await error_of(await one_turn(daemon, turn(resume=True)))
        assert missing.code is p.ErrorCode.NO_SUCH_SESSION
        done = await one_turn(daemon, turn(resume=False, content="Anew."))
        assert isinstance(done[-1], p.TurnDoneFrame)
    assert contents(folder / "0.jsonl") == ["Anew.", "ok"]
    (aside,) = [n for n in os.listdir(tmp_path / "sessions") if n.startswith(".aside-s1-")]
    assert os.listdir(tmp_path / "sessions" / aside) == ["0.baseline.json"]  # kept
    assert f"what it held is kept in {tmp_path / 'sessions' / aside}" in caplog.text


async def test_a_log_cut_mid_record_ends_the_turn_and_the_next_resumes_from_the_cut(
    tmp_path: Path,
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        await one_turn(daemon, turn(content="First."))
        log = daemon.store.folder(S1) / "0.jsonl"
        whole = log.read_bytes()
        size = len(whole)
        os.truncate(log, size - 10)
        error = await error_of(await one_turn(daemon, turn(resume=True, content="Lost?")))
        assert error.code is p.ErrorCode.INTERNAL
        assert f"{log} was cut from {size} to {size - 10} bytes" in error.message
        assert log.stat().st_size == size - 10  # nothing written after the cut
        done = await one_turn(daemon, turn(resume=True, content="After."))
        assert isinstance(done[-1], p.TurnDoneFrame)
    # The cut record went aside with the assistant record of its write (resume's rule for a
    # torn last write), and the turn went on from there.
    assert contents(log) == ["First.", "After.", "ok"]
    start, user, assistant, usage = whole.splitlines(keepends=True)
    torn = log.with_name(f"0.jsonl.torn-{len(start) + len(user)}")
    assert torn.read_bytes() == assistant + usage[:-10]


async def test_a_log_written_by_something_else_is_not_appended_to(tmp_path: Path) -> None:
    store = Store(tmp_path, TickingClock())
    session = await store.create(S1, BASELINE, "main")
    try:
        with session.log_path.open("ab") as other:
            other.write(b'{"type":"user","time":"2026-11-29T21:31:35.000000Z","content":"x"}\n')
        before = session.log_path.read_bytes()
        with pytest.raises(LogChanged, match=r"grew from \d+ to \d+ bytes written by something"):
            await session.append(p.UserRecord(time=p.Timestamp.parse("2026-11-29T21:31:36.000000Z"),
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
        await store.resume(S1)
    created = await store.create(S1, BASELINE, "main")  # not SessionExists: not wedged
    created.close()
    assert store.exists(S1)
    (await store.resume(S1)).close()
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
    (await store.create(S1, BASELINE, "main")).close()
    log = store.folder(S1) / "0.jsonl"
    deep = b'{"type":"user","time":"2026-11-29T21:31:35.000000Z","content":' + b"[" * 1000
    with log.open("ab") as out:
        out.write(deep + b"]" * 1000 + b"}\n")
        out.write(b'{"type":"user","time":"2026-11-29T21:31:36.000000Z","content":"x"}\n')
    with pytest.raises(
        TornLog, match=rf"{log}, line 2: not a log record: .*nested deeper than 100"
    ):
        await store.resume(S1)
