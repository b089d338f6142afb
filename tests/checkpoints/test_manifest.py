"""A manifest's bytes are canonical (equal manifests, equal bytes and ids, whatever their
modification times), round-trip any name a disk can hold, and are checked row by row when
read; a change is shown to a person as a bounded diff, or in one line for a binary file."""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.brokerd.checkpoints import (
    CheckpointError,
    Entry,
    Manifest,
    changed,
    decode,
    diff_text,
    encode,
    manifest_id,
)

SHA = "0123456789abcdef" * 4
names = st.text(st.characters(blacklist_characters="/\0", blacklist_categories=["Cs"]),
                min_size=1, max_size=8).filter(lambda n: n not in (".", ".."))  # fmt: skip
undecodable = st.binary(min_size=1, max_size=4).map(lambda b: (b"\xff" + b).decode(
    "utf-8", "surrogateescape")).filter(lambda n: "/" not in n and "\0" not in n)  # fmt: skip
entries = st.one_of(
    st.builds(Entry, st.just("dir"), st.integers(0, 0o7777), st.integers(0, 2**32),
              st.integers(0, 2**32)),
    st.builds(Entry, st.just("file"), st.integers(0, 0o7777), st.integers(0, 9), st.integers(0, 9),
              st.integers(0, 2**40), st.just(SHA), mtime_ns=st.integers(0, 2**62)),
    st.builds(Entry, st.just("link"), st.just(0o777), target=st.text(max_size=20) | undecodable),
    st.builds(Entry, st.just("other"), st.integers(0, 0o7777)),
)  # fmt: skip
manifests = st.dictionaries(
    st.lists(names | undecodable, min_size=1, max_size=3).map("/".join), entries, max_size=8
)


@given(manifests)
def test_a_manifest_round_trips_through_its_bytes(manifest: Manifest) -> None:
    assert decode(encode(manifest)) == manifest
    assert encode(decode(encode(manifest))) == encode(manifest)


def test_equal_manifests_have_equal_ids_whatever_their_times() -> None:
    a = {"f": Entry("file", 0o644, size=1, sha256=SHA, mtime_ns=1)}
    b = {"f": Entry("file", 0o644, size=1, sha256=SHA, mtime_ns=2)}
    assert a == b
    assert manifest_id(a) == manifest_id(b)
    assert manifest_id(a) != manifest_id({"f": Entry("file", 0o600, size=1, sha256=SHA)})


def test_changed_names_what_was_added_removed_or_changed() -> None:
    a = {"same": Entry("dir"), "gone": Entry("dir"), "mode": Entry("dir", 0o755)}
    b = {"same": Entry("dir"), "new": Entry("dir"), "mode": Entry("dir", 0o700)}
    assert changed(a, b) == {"gone", "new", "mode"}


def rows(*rows: list[object]) -> bytes:
    return zlib.compress(json.dumps({"version": 1, "entries": rows}).encode())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not zlib", "not zlib data"),
        (zlib.compress(b"[1]"), "not version 1"),
        (rows(["a", "file", 1, 0, 0, 0, "", ""]), "row 1 has a hash"),
        (rows(["a", "door", 1, 0, 0, 0, "", ""]), "kind 'door'"),
        (rows(["a", "dir", -1, 0, 0, 0, "", ""]), "row 1 has a mode"),
        (rows(["a", "dir", 1, 0, 0, 0, SHA, ""]), "row 1 has a hash"),
        (rows(["a", "dir", 1, 0, 0, 0, "", "x"]), "row 1 has a link target"),
        (rows(["a", "dir", 1, 0, 0, 0, "", ""], ["a", "dir", 1, 0, 0, 0, "", ""]),
         "row 2 repeats the path 'a'"),
        (zlib.compress(b" " * 2000), "more than 1000 bytes"),
    ],
)  # fmt: skip
def test_a_damaged_manifest_is_an_error_naming_its_row(data: bytes, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        decode(data, most=1000)


def test_a_text_change_is_a_unified_diff() -> None:
    text = diff_text(b"one\ntwo\n", b"one\nthree\n", "notes.txt")
    assert text.splitlines() == [
        "--- a/notes.txt", "+++ b/notes.txt", "@@ -1,2 +1,2 @@", " one", "-two", "+three",
    ]  # fmt: skip
    assert diff_text(None, b"new", "n.txt").splitlines()[:2] == ["--- /dev/null", "+++ b/n.txt"]


def test_a_long_diff_keeps_its_head_and_tail() -> None:
    old = b"".join(b"line %d\n" % i for i in range(1000))
    text = diff_text(old, None, "big.txt", most_lines=20)
    lines = text.splitlines()
    assert len(lines) == 21
    assert lines[:3] == ["--- a/big.txt", "+++ /dev/null", "@@ -1,1000 +0,0 @@"]
    assert lines[10] == "… 983 lines left out …"
    assert lines[-1] == "-line 999"


def test_a_binary_change_is_one_line() -> None:
    assert diff_text(b"\x00\x01\x02", b"\x00" * 4, "a.bin") == "binary file, 3 bytes → 4 bytes"
    assert diff_text(None, b"\xff\xfe", "b.bin") == "binary file, none → 2 bytes"


def test_a_path_cannot_forge_a_line_of_the_diff() -> None:
    text = diff_text(b"a\n", b"b\n", "x\n+++ y")
    assert text.splitlines()[0] == "--- a/x\\x0a+++ y"
