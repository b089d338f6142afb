"""`bxctl memory`: the notes listed, shown, added and withdrawn from their file; recall's
search over the notes and every session; the index rebuilt; a damaged file or a wrong id an
error a person can act on."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from boxmaker.cli.bxctl import main
from boxmaker.cli.memory_command import memory_lines
from boxmaker.memory import NotesFile

from ..processes import BIN


def bxctl(home: Path, *words: str) -> tuple[int, str, str]:
    result = subprocess.run(
        [BIN / "bxctl", "memory", *words, "--home", str(home)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    return result.returncode, result.stdout, result.stderr


def test_notes_are_added_listed_shown_and_withdrawn(tmp_path: Path) -> None:
    assert bxctl(tmp_path, "add", "The kettle is blue.", "--pin") == (
        0,
        "kept as n1 (pinned)\n",
        "",
    )
    assert bxctl(tmp_path, "add", "Water the fern on Sundays.")[1] == "kept as n2\n"
    code, out, _ = bxctl(tmp_path, "ls")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "MADE", "PIN", "FROM", "NOTE"]
    assert lines[1].split()[0::2][:2] == ["n1", "pin"]
    assert lines[1].endswith("you   The kettle is blue.")
    assert lines[2].endswith("Water the fern on Sundays.")
    assert bxctl(tmp_path, "rm", "n1") == (0, "withdrew n1\n", "")
    assert [line.split()[0] for line in bxctl(tmp_path, "ls")[1].splitlines()[1:]] == ["n2"]
    assert "(withdrawn " in bxctl(tmp_path, "ls", "--all")[1]
    code, out, _ = bxctl(tmp_path, "show", "n1")
    assert code == 0
    assert out.splitlines()[0].startswith("n1, made ")
    assert out.splitlines()[2].startswith("withdrawn ")
    assert out.splitlines()[-1] == "The kettle is blue."
    records = [json.loads(line) for line in bxctl(tmp_path, "ls", "--json")[1].splitlines()]
    assert [r["type"] for r in records] == ["note", "note", "forget"]


def test_a_wrong_id_or_an_empty_note_is_an_error_with_nothing_written(tmp_path: Path) -> None:
    assert bxctl(tmp_path, "rm", "n7") == (1, "", "error: There is no note n7.\n")
    assert bxctl(tmp_path, "show", "n7")[0] == 1
    assert bxctl(tmp_path, "add", "   ")[2] == "error: Nothing was kept: the note is empty.\n"
    assert (
        not (tmp_path / "memory" / "notes.jsonl").exists()
        or NotesFile(tmp_path).read().records == ()
    )
    assert bxctl(tmp_path, "ls") == (0, "", f"no notes in {tmp_path}/memory/notes.jsonl\n")


def test_a_damaged_notes_file_is_said_and_left_as_it_is(tmp_path: Path) -> None:
    bxctl(tmp_path, "add", "one")
    path = tmp_path / "memory" / "notes.jsonl"
    damaged = path.read_bytes().replace(b"one", b"two")
    path.write_bytes(damaged)
    code, _, err = bxctl(tmp_path, "add", "three")
    assert code == 1
    assert "notes.jsonl, line 1: hash_mismatch" in err
    assert path.read_bytes() == damaged
    assert bxctl(tmp_path, "ls")[0] == 1


def test_search_finds_notes_and_sessions_and_reindex_makes_the_same(tmp_path: Path) -> None:
    bxctl(tmp_path, "add", "The lighthouse keeper is called Ana.")
    code, out, _ = bxctl(tmp_path, "search", "lighthouse keeper")
    assert code == 0
    assert (
        out.splitlines()[1]
        == f"- note n1 ({out.split('(')[1][:10]}): The lighthouse keeper is called Ana."
    )
    code, out, _ = bxctl(tmp_path, "reindex")
    assert code == 0
    assert out.startswith(f"rebuilt {tmp_path}/memory/index.sqlite in ")
    assert out.endswith(": 1 passages from 1 files\n")
    assert bxctl(tmp_path, "search", "lighthouse keeper")[1].count("\n- ") == 1
    assert bxctl(tmp_path, "search", "weather") == (0, 'nothing in memory matches "weather"\n', "")


def test_the_listing_the_chat_shows() -> None:
    assert memory_lines(NotesFile(Path("/nonexistent")).read()) == []


def test_bxctl_memory_runs_in_process_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "add", "in process", "--home", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "kept as n1\n"
