"""The notes: what `remember` and `forget` write (or refuse), the memory a new baseline holds,
and `notes.jsonl` itself: chained, written under its lock by two processes at once, a damaged
line refused naming it, a write cut short set aside, a link or another user's file refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.layout import torn_name
from boxmaker.memory import (
    MAX_NOTE,
    PINNED_HEADING,
    Notes,
    NotesDamaged,
    NotesFile,
    baseline_memory,
    memory_text,
    remembered,
    withdrawn,
)
from boxmaker.session import Exposed, StorageError
from boxmaker.store.fs import TORN_COPIES

NOW = p.Timestamp.parse("2026-12-04T10:00:00.000000Z")
SID = p.SessionId("chat-1")


def note(notes: NotesFile, text: str, pin: bool = False) -> p.NoteRecord:
    made = notes.append(lambda now: remembered(now, text, pin, NOW))
    assert isinstance(made, p.NoteRecord)
    return made


def test_a_note_takes_the_next_id_and_keeps_where_it_came_from() -> None:
    made = remembered(Notes(), "  The owner likes green tea.\n", False, NOW, session=SID, turn=3)
    assert made == p.NoteRecord(NOW, "n1", "The owner likes green tea.", False, SID, 3)
    notes = Notes((made, p.ForgetRecord(NOW, "n1")))
    assert notes.next_id == "n2"  # a withdrawn id is never given again
    assert notes.live == {}


def test_remember_refuses_what_is_no_note() -> None:
    assert remembered(Notes(), " \n ", False, NOW) == "Nothing was kept: the note is empty."
    said = remembered(Notes(), "x" * (MAX_NOTE + 1), False, NOW)
    assert isinstance(said, str)
    assert f"{MAX_NOTE:,} characters" in said
    assert isinstance(remembered(Notes(), "a\x00b", False, NOW), str)


def test_forget_withdraws_a_live_note_once() -> None:
    made = remembered(Notes(), "tea", False, NOW)
    assert isinstance(made, p.NoteRecord)
    notes = Notes((made,))
    assert withdrawn(notes, "n1", NOW, session=SID, turn=2) == p.ForgetRecord(NOW, "n1", SID, 2)
    gone = Notes((made, p.ForgetRecord(NOW, "n1")))
    assert withdrawn(gone, "n1", NOW) == "Note n1 was withdrawn already."
    assert withdrawn(notes, "n9", NOW) == "There is no note n9."


def test_a_baseline_holds_core_md_then_the_pins_within_their_budget() -> None:
    notes = Notes(tuple(
        p.NoteRecord(NOW, f"n{n}", f"pin number {n}", pin=n != 2, untrusted=n == 4)
        for n in range(1, 6)
    ))  # fmt: skip
    text = baseline_memory("The owner is Ada.\n\n", notes, budget=10_000)
    assert text == "\n".join([
        "The owner is Ada.", "", PINNED_HEADING, "- [n1] pin number 1", "- [n3] pin number 3",
        "- [n4, from a tool's words] pin number 4", "- [n5] pin number 5",
    ])  # fmt: skip
    small = baseline_memory(None, notes, budget=25)  # the newest first: the owner's later word
    assert small.splitlines()[1:] == [
        "- [n5] pin number 5",
        "(3 more pinned notes did not fit here: recall finds them.)",
    ]
    assert baseline_memory(" \n", Notes(), 100) == ""


def test_the_file_is_chained_and_read_back_as_written(tmp_path: Path) -> None:
    notes = NotesFile(tmp_path)
    one, two = note(notes, "tea", pin=True), note(notes, "coffee")
    assert notes.append(lambda now: withdrawn(now, "n1", NOW)) == p.ForgetRecord(NOW, "n1")
    assert notes.read().records == (one, two, p.ForgetRecord(NOW, "n1"))
    lines = [json.loads(line) for line in notes.path.read_bytes().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3]
    assert lines[1]["prev"] == lines[0]["hash"]
    assert os.stat(notes.path).st_mode & 0o777 == 0o600
    assert os.stat(notes.folder).st_mode & 0o777 == 0o700
    assert notes.append(lambda now: withdrawn(now, "n7", NOW)) == "There is no note n7."
    assert len(notes.read().records) == 3  # a refusal writes nothing


def test_a_changed_line_is_refused_naming_it_and_nothing_is_appended(tmp_path: Path) -> None:
    notes = NotesFile(tmp_path)
    note(notes, "tea")
    note(notes, "coffee")
    data = notes.path.read_bytes().replace(b"coffee", b"cocoa!")
    notes.path.write_bytes(data)
    with pytest.raises(NotesDamaged, match=r"notes\.jsonl, line 2: hash_mismatch"):
        notes.read()
    with pytest.raises(NotesDamaged):
        note(notes, "milk")
    assert notes.path.read_bytes() == data
    said, problem = memory_text(tmp_path, 1000)  # a baseline is still made, without the pins
    assert said == ""
    assert problem is not None
    assert "line 2" in problem


def test_a_write_cut_short_is_left_out_then_set_aside_by_the_next_writer(tmp_path: Path) -> None:
    notes = NotesFile(tmp_path)
    note(notes, "tea")
    whole = notes.path.read_bytes()
    with notes.path.open("ab") as file:
        file.write(b'{"type":"note","time":"2026-12-04T10:00:00.000000Z","id":"n2","te')
    assert [r.id for r in notes.read().records] == ["n1"]  # a reader leaves it out
    made = note(notes, "coffee")
    assert made.id == "n2"
    aside = tmp_path / "memory" / f"notes.jsonl.torn-{len(whole)}"
    assert aside.read_bytes().startswith(b'{"type":"note"')
    assert [r.id for r in notes.read().records] == ["n1", "n2"]


def test_a_write_cut_short_with_no_name_left_to_keep_it_is_not_thrown_away(
    tmp_path: Path,
) -> None:
    notes = NotesFile(tmp_path)
    note(notes, "tea")
    whole = notes.path.read_bytes()
    torn = b'{"type":"note","time":"2026-12-04T10:00:00.000000Z","id":"n2","te'
    with notes.path.open("ab") as file:
        file.write(torn)
    for copy in range(1, TORN_COPIES + 1):  # every name a torn tail of this offset may take
        (tmp_path / "memory" / torn_name("notes.jsonl", len(whole), copy)).write_bytes(b"")
    with pytest.raises(StorageError, match="File exists"):
        note(notes, "coffee")
    assert notes.path.read_bytes() == whole + torn  # nothing cut, nothing written


def test_a_link_or_a_file_others_can_write_is_refused(tmp_path: Path) -> None:
    notes = NotesFile(tmp_path)
    note(notes, "tea")
    os.chmod(notes.path, 0o622)
    with pytest.raises(Exposed, match="writable by group or others"):
        notes.read()
    os.chmod(notes.path, 0o600)
    elsewhere = tmp_path / "elsewhere.jsonl"
    notes.path.rename(elsewhere)
    notes.path.symlink_to(elsewhere)
    with pytest.raises(Exposed, match="symbolic link"):
        note(notes, "coffee")


WRITER = """
import sys
from pathlib import Path
from boxmaker import proto as p
from boxmaker.memory import NotesFile, remembered
now = p.Timestamp.parse("2026-12-04T10:00:00.000000Z")
notes = NotesFile(Path(sys.argv[1]))
for n in range(40):
    notes.append(lambda held: remembered(held, f"{sys.argv[2]} {n}", False, now))
"""


def test_two_processes_appending_at_once_lose_nothing_and_share_no_id(tmp_path: Path) -> None:
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name])
        for name in ("left", "right")
    ]
    for writer in writers:
        assert writer.wait(timeout=60) == 0
    made = NotesFile(tmp_path).read().records
    assert sorted(r.id for r in made) == sorted(f"n{n}" for n in range(1, 81))
    texts = {r.text for r in made if isinstance(r, p.NoteRecord)}
    assert texts == {f"{name} {n}" for name in ("left", "right") for n in range(40)}
