"""brokerd's file tools: what each answers, its bounds, and the walk beneath a root that no
link, `..`, device, FIFO or socket gets out of, even when a folder is swapped for a link
between the walk and the open (the `_walk.after_walk` seam)."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from boxmaker.brokerd.files import _walk
from boxmaker.brokerd.files.file_tools import FileLimits, run_file_tool
from boxmaker.brokerd.files.roots import FILE_TOOLS, READS, WRITES, Located, Root
from boxmaker.proto import DataClass, DeniedResponse, FailedResponse, ResultResponse

SECRET = "the secret outside the workspace\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace, with a folder `outside` next to it holding `secret.txt`."""
    base = tmp_path.resolve()
    (base / "ws").mkdir()
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text(SECRET)
    return base / "ws"


def run(
    ws: Path,
    tool: str,
    path: str | None = None,
    *,
    limits: FileLimits | None = None,
    **arguments: Any,
) -> Any:
    """`tool`'s answer for `path` in the workspace `ws`, located as `roots.locate` would."""
    root = Root("workspace", PurePosixPath(ws), read=True, write=True, data_class=DataClass.PRIVATE)
    parts = tuple(part for part in (path or "").split("/") if part not in ("", "."))
    if path is not None:
        arguments["path"] = path
    return run_file_tool(tool, arguments, Located(root, parts), limits or FileLimits())


def content(response: Any) -> str:
    assert isinstance(response, ResultResponse), response
    return response.content


def failed(response: Any) -> str:
    assert isinstance(response, FailedResponse), response
    return response.message


def denied(response: Any) -> str:
    assert isinstance(response, DeniedResponse), response
    return response.reason


def test_the_tool_names() -> None:
    assert FILE_TOOLS == READS + WRITES
    assert READS == ("read_file", "list_dir", "search_files")
    assert WRITES == ("write_file", "edit_file")


# read_file


def test_read_file_numbers_each_line_as_untrusted_text_of_the_roots_class(ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\n\tthree\n")
    response = run(ws, "read_file", "a.txt")
    assert response == ResultResponse(
        "     1\tone\n     2\ttwo\n     3\t\tthree",
        DataClass.PRIVATE,
        untrusted=True,
        truncated=False,
    )


def test_read_file_shows_a_window_and_says_how_to_read_on(ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    assert content(run(ws, "read_file", "a.txt", offset=3, limit=2)) == (
        "     3\tline 3\n     4\tline 4\n... 6 more lines: read_file with offset 5"
    )
    assert content(run(ws, "read_file", "a.txt", offset=9)) == "     9\tline 9\n    10\tline 10"


def test_read_file_reads_read_lines_lines_by_default(ws: Path) -> None:
    (ws / "a.txt").write_text("a\nb\nc\nd\ne")  # no newline at the end
    shown = content(run(ws, "read_file", "a.txt", limits=FileLimits(read_lines=3)))
    assert shown == "     1\ta\n     2\tb\n     3\tc\n... 2 more lines: read_file with offset 4"


def test_an_offset_past_the_end_says_how_many_lines_there_are(ws: Path) -> None:
    (ws / "a.txt").write_text("a\nb\nc\n")
    assert failed(run(ws, "read_file", "a.txt", offset=4)) == (
        "a.txt has 3 lines: offset 4 is past the end."
    )


def test_an_empty_file_is_said_to_be_empty(ws: Path) -> None:
    (ws / "empty").write_bytes(b"")
    assert content(run(ws, "read_file", "empty")) == "empty is empty."


def test_read_file_reads_at_most_read_bytes_and_says_where_it_cut(ws: Path) -> None:
    (ws / "big.txt").write_text("0123456789\n" * 10)  # 110 bytes
    shown = content(run(ws, "read_file", "big.txt", limits=FileLimits(read_bytes=25)))
    assert shown.splitlines() == [
        "     1\t0123456789",
        "     2\t0123456789",
        "     3\t012",
        "... cut at 25 of 110 bytes: read_file reads no further into a file; search_files can "
        "find a line.",
    ]
    window = content(run(ws, "read_file", "big.txt", limits=FileLimits(read_bytes=25), limit=1))
    assert window.endswith("... 2 more lines before the cut at 25 bytes: read_file with offset 2")


def test_a_cut_inside_a_character_is_still_text(ws: Path) -> None:
    (ws / "e.txt").write_text("ééé")  # 6 bytes; a cut at 3 falls inside the second é
    assert content(run(ws, "read_file", "e.txt", limits=FileLimits(read_bytes=3))).startswith(
        "     1\té\n"
    )


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "PNG image"),
        (b"\xff\xd8\xff\xe0\0\x10JFIF", "JPEG image"),
        (b"GIF89a\x01\0\x01\0", "GIF image"),
        (b"%PDF-1.7\n\0binary", "PDF document"),
        (b"PK\x03\x04\x14\0\0\0", "ZIP archive"),
        (b"\x1f\x8b\x08\0\0\0", "gzip data"),
        (b"\x7fELF\x02\x01\x01\0", "ELF executable"),
        (b"\0\0\0\x01", "binary data"),
        (b"caf\xe9 latin-1", "binary data"),  # no NUL, but not UTF-8
    ],
)
def test_a_binary_file_is_refused_with_its_size_and_kind(ws: Path, head: bytes, kind: str) -> None:
    (ws / "blob").write_bytes(head + b"x" * 100)
    size = len(head) + 100
    message = f"blob is a binary file ({kind}, {size} bytes), not text: read_file reads text."
    assert failed(run(ws, "read_file", "blob")) == message


def test_read_file_of_what_is_not_there_or_a_folder_says_what_to_do(ws: Path) -> None:
    (ws / "sub").mkdir()
    assert failed(run(ws, "read_file", "nope.txt")) == (
        "nope.txt does not exist: list_dir its folder to see what does."
    )
    assert failed(run(ws, "read_file", "nope/a.txt")) == (
        "nope/a.txt: there is no folder 'nope' on the way; list_dir its parent to see what "
        "there is."
    )
    assert failed(run(ws, "read_file", "sub")) == "sub is a folder, not a file: use list_dir on it."
    (ws / "f").write_text("x")
    assert failed(run(ws, "read_file", "f/a.txt")) == "f/a.txt: 'f' is a file, not a folder."


# list_dir


def test_list_dir_shows_every_entry_sorted_with_its_kind(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "b.txt").write_text("hello")
    (ws / ".hidden").write_text("")
    (ws / "a").mkdir()
    (ws / "link").symlink_to("/nowhere")
    os.mkfifo(ws / "pipe")
    monkeypatch.chdir(ws)  # a socket's path is short this way
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")
        assert content(run(ws, "list_dir", ".")) == (
            ".hidden  0 bytes\na/\nb.txt  5 bytes\nlink -> /nowhere\npipe  (FIFO)\nsock  (socket)"
        )


def test_list_dir_shows_names_that_would_forge_a_line_escaped(ws: Path) -> None:
    os.mkdir(os.path.join(os.fsencode(ws), b"bad\nname\xff"))
    assert content(run(ws, "list_dir", ".")) == "bad\\x0aname\ufffd/"


def test_list_dir_lists_list_entries_entries_then_says_how_many_more(ws: Path) -> None:
    for name in "edcba":
        (ws / name).write_text("")
    shown = content(run(ws, "list_dir", ".", limits=FileLimits(list_entries=3)))
    assert shown == "a  0 bytes\nb  0 bytes\nc  0 bytes\n... and 2 more"


def test_list_dir_of_a_sub_folder_an_empty_one_a_file_and_nothing(ws: Path) -> None:
    (ws / "sub" / "empty").mkdir(parents=True)
    (ws / "sub" / "x").write_text("abc")
    assert content(run(ws, "list_dir", "sub")) == "empty/\nx  3 bytes"
    assert content(run(ws, "list_dir", "sub/empty")) == "sub/empty is an empty folder."
    assert failed(run(ws, "list_dir", "sub/x")) == (
        "sub/x is a file, not a folder: use read_file on it."
    )
    assert failed(run(ws, "list_dir", "gone")).startswith("gone does not exist")


# search_files


def make_tree(ws: Path) -> None:
    (ws / "a").mkdir()
    (ws / "a" / "c.txt").write_text("nothing\nneedle in a\n")
    (ws / "a.txt").write_text("needle one\nhay\nneedle two\n")
    (ws / ".b.txt").write_text("a hidden needle\n")
    (ws / "z.txt").write_text("no match here\n")


def test_search_files_answers_file_line_text_in_sorted_depth_first_order(ws: Path) -> None:
    make_tree(ws)
    assert content(run(ws, "search_files", pattern="need+le")) == (
        ".b.txt:1: a hidden needle\na/c.txt:2: needle in a\na.txt:1: needle one\n"
        "a.txt:3: needle two"
    )


def test_search_files_in_a_folder_is_relative_to_it_and_in_a_file_is_that_file(ws: Path) -> None:
    make_tree(ws)
    assert content(run(ws, "search_files", "a", pattern="needle")) == "c.txt:2: needle in a"
    assert content(run(ws, "search_files", "a.txt", pattern="two$")) == "a.txt:3: needle two"


def test_search_files_without_a_match_says_so(ws: Path) -> None:
    make_tree(ws)
    assert content(run(ws, "search_files", pattern="pin")) == (
        "No match for 'pin' in . (4 files searched)."
    )


def test_a_long_matching_line_is_cut_at_200_characters(ws: Path) -> None:
    (ws / "long.txt").write_text("x" * 300 + "\n")
    assert content(run(ws, "search_files", pattern="x")) == f"long.txt:1: {'x' * 200}..."


def test_a_bad_pattern_is_refused_quoting_the_error(ws: Path) -> None:
    assert failed(run(ws, "search_files", pattern="(a")) == (
        "The pattern '(a' is not a regular expression: missing ) at position 2."
    )


def test_search_files_skips_big_and_binary_files_and_does_not_follow_links(ws: Path) -> None:
    (ws / "big.txt").write_text("needle " * 10)
    (ws / "blob").write_bytes(b"needle\0")
    (ws / "out").symlink_to("../outside")
    (ws / "secret.txt").symlink_to("../outside/secret.txt")
    os.mkfifo(ws / "pipe")  # never opened: the search would block on it
    (ws / "small.txt").write_text("needle\n")
    limits = FileLimits(search_file_bytes=20)
    shown = content(run(ws, "search_files", limits=limits, pattern="secret|needle"))
    assert shown == "small.txt:1: needle\n(skipped: 1 binary, 1 over 20 bytes)"


def test_search_files_stops_at_search_lines_and_says_so(ws: Path) -> None:
    (ws / "a.txt").write_text("hit\n" * 5)
    shown = content(run(ws, "search_files", limits=FileLimits(search_lines=3), pattern="hit"))
    assert shown.splitlines() == [
        "a.txt:1: hit",
        "a.txt:2: hit",
        "a.txt:3: hit",
        "... stopped at 3 matching lines, the most search_files returns: make the pattern or the "
        "path narrower.",
    ]
    (ws / "a.txt").write_text("hit\n" * 3)  # exactly as many: nothing was left out
    assert (
        content(run(ws, "search_files", limits=FileLimits(search_lines=3), pattern="hit")).count(
            "\n"
        )
        == 2
    )


def test_search_files_stops_at_search_files_files_and_says_so(ws: Path) -> None:
    for name in "abc":
        (ws / f"{name}.txt").write_text(f"hit {name}\n")
    shown = content(run(ws, "search_files", limits=FileLimits(search_files=2), pattern="hit"))
    assert shown.splitlines() == [
        "a.txt:1: hit a",
        "b.txt:1: hit b",
        "... stopped after 2 files, the most search_files opens: give a smaller folder as path.",
    ]


def test_a_catastrophic_pattern_is_stopped_by_the_time_budget(ws: Path) -> None:
    (ws / "a.txt").write_text("a" * 5000 + "b\n")
    started = time.monotonic()
    response = run(ws, "search_files", limits=FileLimits(search_seconds=0.2), pattern="(a+)+$")
    assert time.monotonic() - started < 5  # unbounded, this takes longer than the universe
    assert failed(response) == (
        "search_files found nothing in . in time. ... stopped after 0.2 seconds, the most a "
        "search may take, in a.txt (file 1 of the search): use a simpler pattern (no nested "
        "repeats such as (a+)+) or a smaller folder."
    )


def test_matches_found_before_the_time_ran_out_are_kept(ws: Path) -> None:
    (ws / "a.txt").write_text("aa\n")
    (ws / "b.txt").write_text("a" * 5000 + "b\n")
    shown = content(
        run(ws, "search_files", limits=FileLimits(search_seconds=0.2), pattern="(a+)+$")
    )
    first, last = shown.splitlines()
    assert first == "a.txt:1: aa"
    assert last.startswith("... stopped after 0.2 seconds, the most a search may take, in b.txt")


def test_search_files_in_what_is_not_there(ws: Path) -> None:
    assert failed(run(ws, "search_files", "nope", pattern="x")).startswith("nope does not exist")


# write_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_write_file_makes_a_new_file_and_its_folders_0700(ws: Path) -> None:
    response = run(ws, "write_file", "notes/deep/todo.md", content="hello ✓\n")
    assert response == ResultResponse(
        "Wrote 10 bytes to notes/deep/todo.md (new file).",
        DataClass.PRIVATE,
        untrusted=False,
        truncated=False,
    )
    assert (ws / "notes" / "deep" / "todo.md").read_text() == "hello ✓\n"
    assert mode(ws / "notes") == mode(ws / "notes" / "deep") == 0o700
    assert os.listdir(ws / "notes" / "deep") == ["todo.md"]  # no hidden name left


def test_write_file_replaces_a_file_whole_keeping_its_mode(ws: Path) -> None:
    (ws / "a.sh").write_text("old and long\n")
    (ws / "a.sh").chmod(0o751)
    assert content(run(ws, "write_file", "a.sh", content="new\n")) == (
        "Wrote 4 bytes to a.sh (replaced)."
    )
    assert (ws / "a.sh").read_text() == "new\n"
    assert mode(ws / "a.sh") == 0o751
    assert os.listdir(ws) == ["a.sh"]


def test_a_write_that_fails_leaves_the_old_file_and_no_hidden_name(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "a.txt").write_text("old\n")

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", full)
    assert failed(run(ws, "write_file", "a.txt", content="new\n")) == (
        "a.txt: No space left on device."
    )
    assert os.listdir(ws) == ["a.txt"]
    assert (ws / "a.txt").read_text() == "old\n"


def test_write_file_refuses_more_than_write_bytes(ws: Path) -> None:
    response = run(ws, "write_file", "a.txt", limits=FileLimits(write_bytes=3), content="four")
    assert (
        failed(response) == "content is 4 bytes, over the 3 bytes a file tool writes: write less."
    )
    assert os.listdir(ws) == []


def test_write_file_replaces_no_folder_link_or_fifo(ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "target.txt").write_text("kept\n")
    (ws / "link.txt").symlink_to("target.txt")
    os.mkfifo(ws / "pipe")
    assert failed(run(ws, "write_file", "sub", content="x")).startswith("sub is a folder")
    assert failed(run(ws, "write_file", ".", content="x")).startswith(". is a folder")
    assert failed(run(ws, "write_file", "link.txt", content="x")).startswith(
        "link.txt is a symbolic link, which write_file does not replace"
    )
    assert denied(run(ws, "write_file", "pipe", content="x")) == (
        "pipe is a FIFO: write_file replaces files only."
    )
    assert (ws / "link.txt").is_symlink()
    assert (ws / "target.txt").read_text() == "kept\n"
    assert stat.S_ISFIFO((ws / "pipe").lstat().st_mode)


# edit_file


def test_edit_file_replaces_the_one_occurrence_keeping_the_mode(ws: Path) -> None:
    (ws / "x.py").write_text("a = 1\nb = 2\n")
    (ws / "x.py").chmod(0o640)
    response = run(ws, "edit_file", "x.py", old="b = 2", new="b = 3")
    assert response == ResultResponse(
        "Replaced 1 occurrence in x.py.", DataClass.PRIVATE, untrusted=False, truncated=False
    )
    assert (ws / "x.py").read_text() == "a = 1\nb = 3\n"
    assert mode(ws / "x.py") == 0o640
    assert os.listdir(ws) == ["x.py"]


def test_edit_file_with_no_match_or_several_says_how_many(ws: Path) -> None:
    (ws / "x.py").write_text("x = 1\nx = 1\nx = 1\n")
    assert failed(run(ws, "edit_file", "x.py", old="y", new="z")) == (
        "old was not found in x.py: read_file it and copy the text exactly, spaces and line ends "
        "included."
    )
    assert failed(run(ws, "edit_file", "x.py", old="x = 1", new="x = 2")) == (
        "old found 3 times in x.py: give more context to make it unique, or set replace_all."
    )
    assert (ws / "x.py").read_text() == "x = 1\nx = 1\nx = 1\n"


def test_edit_file_with_replace_all_replaces_every_occurrence(ws: Path) -> None:
    (ws / "x.py").write_text("x = 1\nx = 1\nx = 1\n")
    response = run(ws, "edit_file", "x.py", old="1", new="22", replace_all=True)
    assert content(response) == "Replaced 3 occurrences in x.py."
    assert (ws / "x.py").read_text() == "x = 22\nx = 22\nx = 22\n"


def test_edit_file_refuses_an_empty_old_a_binary_file_and_a_result_too_big(ws: Path) -> None:
    (ws / "x.py").write_text("abc")
    (ws / "blob").write_bytes(b"\x7fELF\0\0abc")
    assert failed(run(ws, "edit_file", "x.py", old="", new="z")) == (
        "old is empty: give the exact text of x.py to replace."
    )
    assert failed(run(ws, "edit_file", "blob", old="abc", new="z")) == (
        "blob is a binary file (ELF executable, 9 bytes), not text: edit_file reads text."
    )
    response = run(ws, "edit_file", "x.py", limits=FileLimits(write_bytes=4), old="b", new="bbb")
    assert failed(response).startswith("the result is 5 bytes, over the 4 bytes")
    assert (ws / "x.py").read_text() == "abc"


def test_edit_file_through_a_link_edits_the_file_it_leads_to(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "x.py").write_text("old\n")
    (ws / "x.py").symlink_to("real/x.py")
    assert content(run(ws, "edit_file", "x.py", old="old", new="new")) == (
        "Replaced 1 occurrence in x.py."
    )
    assert (ws / "x.py").readlink() == Path("real/x.py")
    assert (ws / "real" / "x.py").read_text() == "new\n"


# links, `..`, devices, FIFOs, sockets


def test_a_link_to_a_file_inside_is_followed(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "real.md").write_text("inside\n")
    (ws / "alias.md").symlink_to("docs/real.md")
    (ws / "d").symlink_to("docs")
    assert content(run(ws, "read_file", "alias.md")) == "     1\tinside"
    assert content(run(ws, "read_file", "d/real.md")) == "     1\tinside"
    assert content(run(ws, "list_dir", "d")) == "real.md  7 bytes"


def test_dot_dot_in_a_link_that_stays_inside_is_followed(ws: Path) -> None:
    (ws / "a").mkdir()
    (ws / "b").mkdir()
    (ws / "b" / "file.txt").write_text("reached\n")
    (ws / "a" / "to_b").symlink_to("../b/./file.txt")
    (ws / "a" / "up").symlink_to("..")
    assert content(run(ws, "read_file", "a/to_b")) == "     1\treached"
    assert content(run(ws, "read_file", "a/up/b/file.txt")) == "     1\treached"
    assert content(run(ws, "list_dir", "a/up")) == "a/\nb/"
    assert content(run(ws, "write_file", "a/up/b/new.txt", content="x")).startswith("Wrote 1 bytes")
    assert (ws / "b" / "new.txt").read_text() == "x"


@pytest.mark.parametrize(
    "path", ["secret.txt", "out/secret.txt", "deep/secret.txt", "in/up/secret.txt"]
)
def test_a_relative_link_that_leads_out_is_denied(ws: Path, path: str) -> None:
    (ws / "secret.txt").symlink_to("../outside/secret.txt")
    (ws / "out").symlink_to("../outside")
    (ws / "in").mkdir()
    (ws / "in" / "back").symlink_to("..")
    (ws / "in" / "up").symlink_to("../../outside")
    (ws / "deep").symlink_to("in/back/in/back/../outside")  # back to the root, then out
    reason = denied(run(ws, "read_file", path))
    assert reason.startswith(f"{path} leads out of the workspace through a link (")
    assert "secret outside" not in reason
    written = run(ws, "write_file", path, content="x")
    if path == "secret.txt":  # the link itself is not replaced, nor followed
        assert failed(written).startswith("secret.txt is a symbolic link")
    else:
        assert denied(written).startswith(f"{path} leads out of the workspace through a link (")
    assert denied(run(ws, "edit_file", path, old="secret", new="x"))
    assert (ws.parent / "outside" / "secret.txt").read_text() == SECRET


@pytest.mark.parametrize("target", ["/etc/passwd", "{outside}/secret.txt", "{ws}/inside.txt"])
def test_an_absolute_link_is_denied_wherever_it_points(ws: Path, target: str) -> None:
    (ws / "inside.txt").write_text("inside\n")
    (ws / "abs").symlink_to(target.format(outside=ws.parent / "outside", ws=ws))
    (ws / "absdir").symlink_to(ws.parent / "outside")
    assert denied(run(ws, "read_file", "abs")).startswith(
        "abs goes through a link to an absolute path ('abs' -> '/"
    )
    assert "leads out of the workspace" in denied(run(ws, "read_file", "absdir/secret.txt"))
    assert denied(run(ws, "write_file", "absdir/secret.txt", content="x"))
    assert denied(run(ws, "search_files", "absdir", pattern="secret"))
    assert (ws.parent / "outside" / "secret.txt").read_text() == SECRET


def test_dev_null_through_a_link_is_denied(ws: Path) -> None:
    (ws / "null").symlink_to("/dev/null")
    (ws / "sub").mkdir()
    (ws / "sub" / "null").symlink_to("../" * 30 + "dev/null")
    assert "absolute path" in denied(run(ws, "read_file", "null"))
    assert "leads out of the workspace" in denied(run(ws, "read_file", "sub/null"))


def test_links_round_in_a_circle_are_too_many(ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    (ws / "self").symlink_to("self")
    message = "too many links (more than 40) followed; a link leads round in a circle."
    assert message in failed(run(ws, "read_file", "a"))
    assert message in failed(run(ws, "read_file", "self/x.txt"))
    assert message in failed(run(ws, "write_file", "a/x.txt", content="x"))


def call_within(seconds: float, call: Any, unblock: Path) -> Any:
    """`call()`'s answer, failing if it has not come within `seconds`; a call blocked opening
    the FIFO `unblock` is released (by opening its other end) so the test ends either way."""
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
            try:
                os.close(os.open(unblock, flags))
            except OSError:
                continue
        thread.join(seconds)
        pytest.fail(f"the call blocked opening {unblock.name}")
    return answers[0]


def test_a_fifo_is_denied_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "link").symlink_to("pipe")
    for tool, path, arguments in [
        ("read_file", "pipe", {}),
        ("read_file", "link", {}),
        ("list_dir", "pipe", {}),
        ("search_files", "pipe", {"pattern": "x"}),
        ("edit_file", "pipe", {"old": "a", "new": "b"}),
    ]:
        response = call_within(10, lambda: run(ws, tool, path, **arguments), ws / "pipe")  # noqa: B023
        assert (
            denied(response)
            == f"{path} is a FIFO: the file tools use regular files and folders only."
        )


def test_a_socket_is_denied(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ws)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")
        assert denied(run(ws, "read_file", "sock")) == (
            "sock is a socket: the file tools use regular files and folders only."
        )
        assert denied(run(ws, "write_file", "sock", content="x")) == (
            "sock is a socket: write_file replaces files only."
        )


def swap_for_link(folder: Path) -> None:
    """Move `folder` aside and put a link to `outside` in its place."""
    folder.rename(folder.with_name(folder.name + ".moved"))
    folder.symlink_to(folder.parent.parent / "outside")


def test_a_folder_swapped_for_a_link_before_the_call_is_denied(ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("inside\n")
    swap_for_link(ws / "sub")
    assert "absolute path" in denied(run(ws, "read_file", "sub/secret.txt"))
    assert "absolute path" in denied(run(ws, "write_file", "sub/new.txt", content="x"))
    assert "absolute path" in denied(run(ws, "edit_file", "sub/secret.txt", old="the", new="a"))
    (ws / "sub").unlink()
    (ws / "sub").symlink_to("../outside")  # relative, this time
    assert "leads out of the workspace" in denied(run(ws, "read_file", "sub/secret.txt"))
    assert "leads out of the workspace" in denied(run(ws, "write_file", "sub/n.txt", content="x"))
    assert os.listdir(ws.parent / "outside") == ["secret.txt"]
    assert (ws.parent / "outside" / "secret.txt").read_text() == SECRET


def test_a_folder_swapped_for_a_link_during_the_call_does_not_redirect_the_open(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("inside\n")
    moved = ws / "sub.moved"
    swaps: list[str] = []

    def swap(located: Located) -> None:  # between the walk of the folders and the last open
        swaps.append(located.shown)
        swap_for_link(ws / "sub")

    def restore() -> None:
        (ws / "sub").unlink()
        moved.rename(ws / "sub")

    monkeypatch.setattr(_walk, "after_walk", swap)
    assert content(run(ws, "read_file", "sub/secret.txt")) == "     1\tinside"
    restore()
    assert content(run(ws, "search_files", "sub/secret.txt", pattern="secret|inside")) == (
        "sub/secret.txt:1: inside"
    )
    restore()
    assert content(run(ws, "write_file", "sub/new.txt", content="x")).startswith("Wrote 1 bytes")
    assert (moved / "new.txt").read_text() == "x"
    restore()
    assert content(run(ws, "edit_file", "sub/secret.txt", old="inside", new="edited"))
    assert (moved / "secret.txt").read_text() == "edited\n"
    assert swaps == ["sub/secret.txt", "sub/secret.txt", "sub/new.txt", "sub/secret.txt"]
    assert (ws / "sub").is_symlink()  # the last swap is still in place
    assert os.listdir(ws.parent / "outside") == ["secret.txt"]
    assert (ws.parent / "outside" / "secret.txt").read_text() == SECRET


def test_a_file_swapped_for_a_link_during_the_call_is_denied(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "secret.txt").write_text("inside\n")

    def swap(located: Located) -> None:
        (ws / "secret.txt").unlink(missing_ok=True)
        (ws / "secret.txt").symlink_to(ws.parent / "outside" / "secret.txt")

    monkeypatch.setattr(_walk, "after_walk", swap)
    assert "absolute path" in denied(run(ws, "read_file", "secret.txt"))
    assert "absolute path" in denied(run(ws, "edit_file", "secret.txt", old="the", new="a"))
    assert failed(run(ws, "write_file", "secret.txt", content="x")).startswith(
        "secret.txt is a symbolic link"
    )
    assert (ws.parent / "outside" / "secret.txt").read_text() == SECRET
