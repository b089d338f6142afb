"""The book records only calls that changed something, finds where an undo starts (or says
why there is none), keeps within `keep_bytes` by dropping the oldest checkpoints first, and
reads its log with suspicion: a damaged line is an error naming it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from boxmaker.brokerd.checkpoints import (
    Book,
    CheckpointError,
    Entry,
    Manifest,
    Selection,
    encode,
    manifest_id,
)

from .room import OURS, ROOT, Room
from .trees import tree_of

SHA = "a" * 64


def files(**contents: str) -> Manifest:
    """A manifest of files named by the keywords (their `sha256` made up)."""
    return {
        name: Entry("file", 0o644, size=len(text), sha256=hashlib.sha256(text.encode()).hexdigest())
        for name, text in contents.items()
    }


def record(book: Book, before: Manifest, after: Manifest, *, turn: int, call: int = 1) -> None:
    book.record(ROOT, before, after, session="s", identity=OURS, turn=turn, call=call, tool="t")


def test_a_call_that_changed_nothing_is_not_recorded(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    same = files(a="1")
    assert book.record(ROOT, same, dict(same), session="s", identity=OURS, turn=1, call=1,
                       tool="t") is None  # fmt: skip
    assert book.entries(ROOT) == []
    assert book.latest(ROOT) is None


def test_checkpoints_are_recorded_and_read_back(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    record(book, {}, files(a="1"), turn=1)
    record(book, files(a="1"), files(a="2"), turn=2, call=7)
    again = Book(tmp_path, 1 << 20)
    assert again.entries(ROOT) == book.entries(ROOT)
    assert [(c.seq, c.turn, c.call) for c in again.entries(ROOT)] == [(1, 1, 1), (2, 2, 7)]
    assert again.latest(ROOT) == manifest_id(files(a="2"))
    assert again.manifest(again.entries(ROOT)[0].before) == {}
    assert again.entries("notes") == []
    assert os.stat(tmp_path / "log.jsonl").st_mode & 0o777 == 0o600


def test_select_finds_the_first_checkpoint_of_a_turn_or_a_call(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    record(book, {}, files(a="1"), turn=1, call=1)
    book.record(ROOT, files(a="1"), files(a="1", b="x"), session="t", identity="another",
                turn=1, call=1, tool="t")  # fmt: skip
    record(book, files(a="1", b="x"), files(a="2", b="x"), turn=3, call=5)
    by_turn = book.select(ROOT, OURS, turn=2)
    assert isinstance(by_turn, Selection)
    assert [c.seq for c in by_turn.checkpoints] == [3]
    assert by_turn.target == files(a="1", b="x")
    by_call = book.select(ROOT, OURS, call=1)
    assert isinstance(by_call, Selection)
    assert [s.ours for s in by_call.steps] == [True, False, True]
    assert by_call.target_id == manifest_id({})


def test_select_says_why_there_is_nothing_to_undo(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    record(book, {}, files(a="1"), turn=1)
    assert book.select(ROOT, OURS, turn=3) == "turn 3 made no change to the workspace"
    assert book.select("notes", OURS, call=4) == "call 4 made no change to the root notes"
    assert book.select(ROOT, "someone else", turn=1) == "turn 1 made no change to the workspace"


def test_trimming_drops_the_oldest_first_and_select_says_no_longer_kept(
    tmp_path: Path,
) -> None:
    room = Room(tmp_path, keep_bytes=25_000)
    blob = [os.urandom(10_000) for _ in range(3)]
    room.call(lambda r: (r / "f.bin").write_bytes(blob[0]), turn=1)
    room.call(lambda r: (r / "f.bin").write_bytes(blob[1]), turn=2)
    before_turn_3 = tree_of(room.root)
    room.call(lambda r: (r / "f.bin").write_bytes(blob[2]), turn=3)
    assert room.book.trim() == 2
    assert [c.turn for c in room.book.entries(ROOT)] == [3]
    kept = b"".join(room.book.objects.read(s) for s in room.book.objects.all_ids())
    assert blob[0] not in kept  # only what the kept checkpoints need
    assert room.book.objects.size_of_all() <= 25_000
    no_longer = (
        "the checkpoints of turn 1 are not kept (dropped for [checkpoints] keep_bytes, or a "
        "call then left the root past its bounds)"
    )
    assert room.book.select(ROOT, OURS, turn=1) == no_longer
    reopened = Book(tmp_path / "book", 25_000)  # what went is remembered
    assert reopened.select(ROOT, OURS, turn=2) == no_longer.replace("turn 1", "turn 2")
    assert reopened.select(ROOT, OURS, turn=9) == "turn 9 made no change to the workspace"
    room.book = reopened
    room.undo(turn=3)
    assert tree_of(room.root) == before_turn_3


def test_trimming_keeps_each_root_s_latest_manifest(tmp_path: Path) -> None:
    room = Room(tmp_path, keep_bytes=5_000)
    content = os.urandom(10_000)
    room.call(lambda r: (r / "f.bin").write_bytes(content))
    latest = room.book.latest(ROOT)
    assert room.book.trim() == 1
    assert room.book.entries(ROOT) == []
    assert room.book.latest(ROOT) == latest
    assert Book(tmp_path / "book", 5_000).latest(ROOT) == latest
    assert room.book.objects.has(room.snap()["f.bin"].sha256)


def test_nothing_is_trimmed_under_the_bound(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    record(book, {}, files(a="1"), turn=1)
    assert book.trim() == 0
    assert len(book.entries(ROOT)) == 1


def line(**changes: object) -> bytes:
    whole = {"seq": 1, "root": ROOT, "before": SHA, "after": SHA, "session": "s",
             "identity": OURS, "turn": 1, "call": 1, "tool": "t", "time": "x"}  # fmt: skip
    return json.dumps({**whole, **changes}).encode() + b"\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"not json\n", "line 2 is not JSON"),
        (line(seq=2, before="../../etc/passwd"), "line 2: a manifest id is not a SHA-256"),
        (line(seq=2, turn="1"), "line 2: turn is not a int"),
        (line(seq=1), "line 2: seq 1 does not follow on"),
        (b"[1, 2]\n", "line 2 is not a checkpoint"),
        (b"[" * 100_000 + b"\n", "line 2 is longer than"),
    ],
)
def test_a_damaged_log_line_is_an_error_naming_it(
    tmp_path: Path, text: bytes, message: str
) -> None:
    (tmp_path / "log.jsonl").write_bytes(line() + text)
    with pytest.raises(CheckpointError, match=message):
        Book(tmp_path, 1 << 20)


def test_a_line_a_crash_cut_short_is_cut_off(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    record(book, {}, files(a="1"), turn=1)
    with open(tmp_path / "log.jsonl", "ab") as f:
        f.write(line(seq=2)[:30])
    again = Book(tmp_path, 1 << 20)
    assert [c.seq for c in again.entries(ROOT)] == [1]
    record(again, files(a="1"), files(a="2"), turn=2)
    assert [c.seq for c in Book(tmp_path, 1 << 20).entries(ROOT)] == [1, 2]


def test_a_trim_stopped_between_its_writes_is_finished_on_reading(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    for turn in (1, 2, 3):
        record(book, files(a=str(turn)), files(a=str(turn + 1)), turn=turn)
    kept = {"dropped": 2, "latest": {}, "sessions": [[ROOT, OURS, 2, 1]]}
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    again = Book(tmp_path, 1 << 20)
    assert [c.seq for c in again.entries(ROOT)] == [3]
    assert "turn 2 are not kept (dropped for" in str(again.select(ROOT, OURS, turn=2))


def test_a_stored_manifest_is_read_back_checked(tmp_path: Path) -> None:
    book = Book(tmp_path, 1 << 20)
    record(book, {}, files(a="1"), turn=1)
    sha = book.entries(ROOT)[0].after
    assert book.objects.read(sha) == encode(files(a="1"))
    book.objects.path_of(sha).write_bytes(encode(files(a="2")))
    with pytest.raises(CheckpointError, match=f"the stored blob {sha} is damaged"):
        book.manifest(sha)
