"""bxctl's line editor with prompt_toolkit's own test input: keys in, one text out."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from boxmaker.cli.editor import History, LineEditor, LineReader, Steered, history_path

PASTE = "\x1b[200~{}\x1b[201~"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe:
        yield pipe


def editor(keys: PipeInput, history: History | None = None) -> LineEditor:
    return LineEditor(history, input=keys, output=DummyOutput())


def test_enter_sends_the_line_and_a_paste_of_many_lines_is_one_text(keys: PipeInput) -> None:
    ed = editor(keys)
    keys.send_text("hello\r")
    assert ed.read() == "hello"
    keys.send_text(PASTE.format("one\r\ntwo\nthree\n") + "\r")
    assert ed.read() == "one\ntwo\nthree\n"  # the trailing newline goes when it is sent


def test_a_block_goes_on_until_its_closing_line_and_alt_enter_starts_a_line(
    keys: PipeInput,
) -> None:
    ed = editor(keys)
    keys.send_text('"""\rfirst\rsecond\r"""\r')
    assert ed.read() == '"""\nfirst\nsecond\n"""'
    keys.send_text("a\x1b\rb\r")  # Alt-Enter is Escape then Enter on a terminal
    assert ed.read() == "a\nb"


def test_editing_keys_work(keys: PipeInput) -> None:
    ed = editor(keys)
    keys.send_text("helo\x1b[D\x1b[Dl\x05!\x01>\r")  # left, left, type, Ctrl-E, Ctrl-A
    assert ed.read() == ">hello!"


def test_ctrl_d_on_an_empty_line_and_ctrl_c_end_the_chat(keys: PipeInput) -> None:
    ed = editor(keys)
    keys.send_text("\x04")
    assert ed.read() is None
    keys.send_text("half typed\x03")
    assert ed.read() is None


def test_history_is_kept_per_user_0600_and_recalled_with_up(
    tmp_path: Path, keys: PipeInput
) -> None:
    path = history_path({"XDG_STATE_HOME": str(tmp_path / "state")})
    assert path == tmp_path / "state" / "boxmaker" / "bxctl-history"
    ed = editor(keys, History(path))
    keys.send_text("first\r")
    assert ed.read() == "first"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = editor(keys, History(path))  # a new chat, the same user
    keys.send_text("\x1b[A\r")
    assert again.read() == "first"


def test_a_history_file_with_loose_modes_is_made_0600(tmp_path: Path) -> None:
    path = tmp_path / "bxctl-history"
    path.write_text("\n# then\n+old\n")
    path.chmod(0o644)
    History(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_history_past_its_limit_keeps_the_newest_whole_entries(tmp_path: Path) -> None:
    path = tmp_path / "bxctl-history"
    path.write_text("".join(f"\n# t\n+entry {i:03d}\n" for i in range(100)))
    history = History(path, limit=200)
    loaded = list(history.load_history_strings())
    assert loaded[0] == "entry 099"
    assert 5 < len(loaded) < 20
    assert all(entry.startswith("entry ") for entry in loaded)  # no entry cut in half
    assert path.stat().st_size <= 200
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_history_path_ignores_a_relative_state_home() -> None:
    assert history_path({"XDG_STATE_HOME": "rel"}) == (
        Path.home() / ".local/state/boxmaker/bxctl-history"
    )


def test_piped_lines_come_one_a_time_and_a_block_whole(tmp_path: Path) -> None:
    piped = tmp_path / "in.txt"
    piped.write_text('a\n"""\nb\nc\n"""\nd')
    with piped.open() as stream:
        reader = LineReader(stream)
        assert [reader.read() for _ in range(4)] == ["a", '"""\nb\nc\n"""', "d", None]


# --- the steering line, while a turn runs -------------------------------------------


def test_the_steering_line_says_what_its_text_is_for(keys: PipeInput) -> None:
    ed = editor(keys)
    keys.send_text("in UTC\r")
    assert ed.steer() == Steered("soft", "in UTC")
    keys.send_text("stop that\x03\r")  # Ctrl-C with text: a hard break, sent by Enter
    assert ed.steer() == Steered("hard", "stop that")
    keys.send_text("maybe\x03\x03\r")  # a second Ctrl-C: back to waiting for a step
    assert ed.steer() == Steered("soft", "maybe")
    keys.send_text("\x03")  # Ctrl-C on an empty line: cancel the turn
    assert ed.steer() == Steered("cancel")
    keys.send_text("\r")
    assert ed.steer() == Steered("back")
    keys.send_text("\x04")
    assert ed.steer() == Steered("closed")
    keys.send_text("next\r")  # the prompt afterwards is the ordinary one again
    assert ed.read() == "next"
    assert (ed.steering, ed.session.bottom_toolbar) == (False, None)


def test_a_turn_that_ends_before_the_line_is_up_leaves_the_keys_for_the_prompt(
    keys: PipeInput,
) -> None:
    ed = editor(keys)
    keys.send_text("half a tho")
    ed.end_steering()  # the turn ended before the line was up: it closes as it opens
    assert ed.steer() == Steered("unsent", "")
    keys.send_text("ught\r")
    assert ed.read() == "half a thought"  # the keys typed meanwhile are the prompt's


def test_the_next_prompt_starts_with_what_the_steering_line_gave_back(keys: PipeInput) -> None:
    ed = editor(keys)
    keys.send_text(" and more\r")
    assert ed.read("half a thought,") == "half a thought, and more"
