"""The walls: a snapshot never reads through a link, nor opens a FIFO, nor enters a closed
root; a restore never writes through a link planted since, never gives back a set-uid or
set-gid bit, gives owners back, and puts back only bytes whose hash checks. Each check here
was seen to fail with the code it proves taken out."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
from pathlib import Path

import pytest

from boxmaker.brokerd.checkpoints import (
    CheckpointError,
    Objects,
    RestoreStopped,
    StatCache,
    decode,
    encode,
    plan_restore,
    restore,
    snapshot,
)
from boxmaker.brokerd.checkpoints.manifest import Entry

from .room import Room
from .trees import tree_of

SECRET = b"the owner's secret, never to be read"
# The module, not the function the package names after it.
snapshot_module = importlib.import_module("boxmaker.brokerd.checkpoints.snapshot")


def blobs(objects: Objects) -> list[bytes]:
    return [objects.read(sha) for sha in objects.all_ids()]


def holds_secret(objects: Objects) -> bool:
    return any(SECRET in blob for blob in blobs(objects))


def test_a_link_out_of_the_root_is_recorded_never_read(room: Room) -> None:
    (room.root / "to-file").symlink_to(room.outside / "secret.txt")
    (room.root / "to-folder").symlink_to(room.outside)
    (room.root / "relative").symlink_to("../outside/secret.txt")
    manifest = room.snap()
    assert manifest == {
        "to-file": Entry("link", 0o777, *_owner(room.root / "to-file"),
                         target=str(room.outside / "secret.txt")),
        "to-folder": Entry("link", 0o777, *_owner(room.root / "to-folder"),
                           target=str(room.outside)),
        "relative": Entry("link", 0o777, *_owner(room.root / "relative"),
                          target="../outside/secret.txt"),
    }  # fmt: skip
    assert not holds_secret(room.book.objects)


def _owner(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def test_a_file_swapped_for_a_link_mid_walk_is_not_read_through(
    room: Room, monkeypatch: pytest.MonkeyPatch
) -> None:
    (room.root / "victim.txt").write_text("harmless\n")

    def swap(path: str) -> None:
        if path == "victim.txt":
            (room.root / "victim.txt").unlink()
            (room.root / "victim.txt").symlink_to(room.outside / "secret.txt")

    monkeypatch.setattr(snapshot_module, "between", swap)
    manifest = room.snap()
    assert "victim.txt" not in manifest or manifest["victim.txt"].kind == "link"
    assert not holds_secret(room.book.objects)


def test_a_folder_swapped_for_a_link_mid_walk_is_not_entered(
    room: Room, monkeypatch: pytest.MonkeyPatch
) -> None:
    (room.root / "sub").mkdir()

    def swap(path: str) -> None:
        if path == "sub":
            (room.root / "sub").rmdir()
            (room.root / "sub").symlink_to(room.outside)

    monkeypatch.setattr(snapshot_module, "between", swap)
    manifest = room.snap()
    assert not any(path.startswith("sub/") for path in manifest)
    assert not holds_secret(room.book.objects)


def test_a_fifo_is_recorded_never_opened(room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(room.root / "pipe")
    (room.root / "becomes-a-pipe").write_text("x")

    def swap(path: str) -> None:  # a file swapped for a FIFO after its stat: not opened
        if path == "becomes-a-pipe":
            (room.root / "becomes-a-pipe").unlink()
            os.mkfifo(room.root / "becomes-a-pipe")

    monkeypatch.setattr(snapshot_module, "between", swap)
    manifest = room.snap()  # returns: an open of a FIFO with no writer would wait for ever
    assert manifest["pipe"].kind == "other"
    assert "becomes-a-pipe" not in manifest


def test_a_closed_root_inside_is_neither_entered_nor_recorded(room: Room) -> None:
    closed = room.root / "closed"
    closed.mkdir()
    (closed / "private.txt").write_bytes(SECRET)
    st = os.stat(closed)
    found = snapshot(room.root, room.identity, room.book.objects, skip=[(st.st_dev, st.st_ino)],
                     max_files=100, max_bytes=1 << 20, cache=StatCache())  # fmt: skip
    assert found == {}
    assert not holds_secret(room.book.objects)


def test_a_root_moved_or_replaced_is_refused(room: Room, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(CheckpointError, match="no longer the folder it was granted as"):
        snapshot(other, room.identity, room.book.objects, max_files=10, max_bytes=10,
                 cache=StatCache())  # fmt: skip
    (tmp_path / "link-root").symlink_to(room.root)
    with pytest.raises(CheckpointError, match="cannot be opened as a folder"):
        snapshot(tmp_path / "link-root", None, room.book.objects, max_files=10, max_bytes=10,
                 cache=StatCache())  # fmt: skip


def test_a_restore_never_writes_through_a_folder_replaced_by_a_link(room: Room) -> None:
    (room.root / "docs").mkdir()
    (room.root / "docs" / "a.md").write_text("ours, first\n")
    room.call(lambda r: (r / "docs" / "a.md").write_text("ours, second\n"))
    plan, selection = room.plan()  # the preview
    shutil.rmtree(room.root / "docs")  # then, before the confirm, a link is planted
    (room.root / "docs").symlink_to(room.outside)
    outside = tree_of(room.outside)
    with pytest.raises(RestoreStopped, match=r"docs is a link or a file now where a folder was"):
        restore(room.root, room.identity, plan, selection.target, room.book.objects)
    assert tree_of(room.outside) == outside


def test_a_restore_replaces_a_link_planted_at_a_file_never_writes_through_it(
    room: Room,
) -> None:
    (room.root / "a.md").write_text("ours, first\n")
    room.call(lambda r: (r / "a.md").write_text("ours, second\n"))
    plan, selection = room.plan()
    (room.root / "a.md").unlink()
    (room.root / "a.md").symlink_to(room.outside / "secret.txt")
    restore(room.root, room.identity, plan, selection.target, room.book.objects)
    assert (room.outside / "secret.txt").read_bytes() == SECRET
    assert not (room.root / "a.md").is_symlink()
    assert (room.root / "a.md").read_text() == "ours, first\n"


def test_a_link_the_session_put_in_place_of_a_folder_is_removed_not_followed(
    room: Room,
) -> None:
    (room.root / "docs").mkdir()
    (room.root / "docs" / "a.md").write_text("a\n")
    before = tree_of(room.root)

    def to_link(root: Path) -> None:
        shutil.rmtree(root / "docs")
        (root / "docs").symlink_to(room.outside)

    room.call(to_link)
    outside = tree_of(room.outside)
    room.undo()
    assert tree_of(room.root) == before
    assert tree_of(room.outside) == outside


def test_a_restore_never_gives_back_a_set_uid_or_set_gid_bit(room: Room) -> None:
    (room.root / "tool").write_text("#!/bin/sh\n")
    (room.root / "tool").chmod(0o4755)
    (room.root / "shared").mkdir()
    (room.root / "shared").chmod(0o2775)
    (room.root / "flip").write_text("x")
    (room.root / "flip").chmod(0o6755)
    before = room.snap()
    assert (before["tool"].mode, before["shared"].mode) == (0o4755, 0o2775)

    def change(root: Path) -> None:
        (root / "tool").unlink()
        (root / "shared").rmdir()
        (root / "flip").chmod(0o644)

    room.call(change)
    room.undo()
    tree = tree_of(room.root)
    assert (tree["tool"]["mode"], tree["shared"]["mode"]) == (oct(0o755), oct(0o775))
    assert tree["flip"]["mode"] == oct(0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_restore_gives_owners_back(room: Room) -> None:
    (room.root / "theirs").mkdir()
    (room.root / "theirs" / "f").write_text("f\n")
    (room.root / "theirs" / "l").symlink_to("f")
    for name in ("theirs", "theirs/f", "theirs/l"):
        os.chown(room.root / name, 1234, 5678, follow_symlinks=False)
    before = tree_of(room.root)
    room.call(lambda r: shutil.rmtree(r / "theirs"))
    room.undo()
    assert tree_of(room.root) == before


def test_a_damaged_blob_is_never_put_back(room: Room) -> None:
    (room.root / "a.md").write_text("ours, first\n")
    room.call(lambda r: (r / "a.md").write_text("ours, second\n"))
    plan, selection = room.plan()
    sha = hashlib.sha256(b"ours, first\n").hexdigest()
    blob = room.book.objects.path_of(sha)
    blob.write_bytes(b"ours, frist\n")  # a bit flipped on disk
    with pytest.raises(RestoreStopped, match=f"the stored blob {sha} is damaged"):
        restore(room.root, room.identity, plan, selection.target, room.book.objects)
    assert sorted(os.listdir(room.root)) == ["a.md"]  # no hidden file left behind
    assert (room.root / "a.md").read_text() == "ours, second\n"


def test_a_manifest_path_leading_out_of_the_root_is_refused() -> None:
    for bad in ("../escape", "a/../../b", "/etc/passwd", "a//b", "."):
        data = encode({bad: Entry("dir", 0o755)})
        with pytest.raises(CheckpointError, match="row 1 has a path"):
            decode(data)


def test_a_plan_made_for_another_target_is_refused(room: Room) -> None:
    (room.root / "a.md").write_text("one\n")
    room.call(lambda r: (r / "a.md").write_text("two\n"))
    plan, selection = room.plan()
    other = {**selection.target, "a.md": Entry("file", 0o644, size=1, sha256="0" * 64)}
    with pytest.raises(CheckpointError, match="not made for this checkpoint"):
        restore(room.root, room.identity, plan, other, room.book.objects)
    assert plan_restore(other, selection.steps, room.snap()).token != plan.token
