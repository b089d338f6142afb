"""An undo puts a root back byte for byte (kinds, bytes, modes, link targets, owners), across
one call or several, and a nested git repository whole; what the owner changed since is a
conflict and nothing is written, and what the session never touched is left alone."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from boxmaker.brokerd.checkpoints import CheckpointError

from .room import Room
from .trees import tree_of

AS_ROOT = os.geteuid() == 0


def build(root: Path) -> None:
    """A small tree with a bit of everything: text, binary, modes, a link, folders."""
    (root / "notes.txt").write_text("hello\nworld\n")
    (root / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "script.sh").chmod(0o755)
    (root / "secret.key").write_bytes(b"k" * 40)
    (root / "secret.key").chmod(0o600)
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# A\n")
    (root / "docs" / "deep" / "b.bin").write_bytes(bytes(range(256)) * 4)
    (root / "docs" / "deep").chmod(0o700)
    (root / "link").symlink_to("notes.txt")
    (root / "dangling").symlink_to("nowhere/at/all")
    if AS_ROOT:
        os.chown(root / "docs" / "a.md", 1234, 5678)


def folders_to(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def edit_in_place(root: Path) -> None:
    with open(root / "notes.txt", "r+b") as f:  # same inode, same size
        f.seek(2)
        f.write(b"XX")


def link_to_file(root: Path) -> None:
    (root / "link").unlink()
    (root / "link").write_text("a file now\n")


def file_to_link(root: Path) -> None:
    (root / "notes.txt").unlink()
    (root / "notes.txt").symlink_to("docs/a.md")


def modes(root: Path) -> None:
    (root / "notes.txt").chmod(0o600)
    (root / "secret.key").chmod(0o755)
    (root / "docs").chmod(0o700)


def folder_to_file(root: Path) -> None:
    shutil.rmtree(root / "docs")
    (root / "docs").write_text("docs are a file now\n")


def file_to_folder(root: Path) -> None:
    (root / "secret.key").unlink()
    (root / "secret.key" / "inside").mkdir(parents=True)
    (root / "secret.key" / "inside" / "x").write_text("x")


def owners(root: Path) -> None:
    os.chown(root / "notes.txt", 4321, 8765)
    os.chown(root / "docs", 4321, 8765)
    os.chown(root / "link", 4321, 8765, follow_symlinks=False)


CHANGES: dict[str, Callable[[Path], object]] = {
    "a file written": lambda root: (root / "notes.txt").write_text("something else\n"),
    "a file edited in place": edit_in_place,
    "a folder removed": lambda root: shutil.rmtree(root / "docs"),
    "a new file made": lambda root: (root / "docs" / "deep" / "new.txt").write_text("new\n"),
    "a link replaced by a file": link_to_file,
    "a file replaced by a link": file_to_link,
    "modes changed": modes,
    "a folder replaced by a file": folder_to_file,
    "a file replaced by a folder": file_to_folder,
    "a link retargeted": lambda root: os.replace(root / "dangling", root / "link"),
}
if AS_ROOT:
    CHANGES["owners changed"] = owners


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_an_undo_puts_the_root_back_byte_for_byte(
    room: Room, change: Callable[[Path], object]
) -> None:
    build(room.root)
    before = tree_of(room.root)
    assert room.call(change) is not None
    assert tree_of(room.root) != before
    restored = room.undo()
    assert tree_of(room.root) == before
    assert restored  # the paths it changed
    assert room.plan()[0].actions == ()  # nothing left to do


def git(root: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.org", *args],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        timeout=30,
    )


def test_an_undo_brings_a_nested_git_repository_back_whole(room: Room) -> None:
    repo = room.root / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "main.py").write_text("print('one')\n")
    git(repo, "add", "main.py")
    git(repo, "commit", "-q", "-m", "one")
    before = tree_of(room.root)

    def work(root: Path) -> None:
        (root / "project" / "main.py").write_text("print('two')\n")
        (root / "project" / "new.py").write_text("x = 2\n")
        git(root / "project", "add", "-A")
        git(root / "project", "commit", "-q", "-m", "two")

    room.call(work)
    assert tree_of(room.root) != before
    room.undo()
    assert tree_of(room.root) == before
    git(repo, "fsck", "--strict")  # git agrees the repository is whole


def test_an_undo_across_three_calls_goes_back_to_before_the_first(room: Room) -> None:
    build(room.root)
    trees = [tree_of(room.root)]
    room.call(lambda r: (r / "notes.txt").write_text("one\n"), turn=1)
    trees.append(tree_of(room.root))
    room.call(lambda r: shutil.rmtree(r / "docs"), turn=2)
    trees.append(tree_of(room.root))
    room.call(lambda r: (r / "docs").mkdir(), turn=3)
    room.undo(turn=2)
    assert tree_of(room.root) == trees[1]
    room.call(lambda r: (r / "notes.txt").write_text("four\n"), turn=4)
    room.undo(turn=1)
    assert tree_of(room.root) == trees[0]


def test_the_owner_s_edit_between_calls_is_a_conflict_and_nothing_is_written(
    room: Room,
) -> None:
    build(room.root)
    room.call(lambda r: (r / "notes.txt").write_text("ours\n"), turn=1)
    (room.root / "notes.txt").write_text("the owner's\n")
    room.call(lambda r: (r / "script.sh").write_text("ours too\n"), turn=2)
    plan, _ = room.plan()
    assert [(c.path, c.reason) for c in plan.conflicts] == [
        ("notes.txt", "changed since by someone else")
    ]
    now = tree_of(room.root)
    with pytest.raises(CheckpointError, match=r"notes\.txt \(changed since by someone else\)"):
        room.undo()
    assert tree_of(room.root) == now


def test_the_owner_s_edit_after_the_last_call_is_a_conflict(room: Room) -> None:
    build(room.root)
    room.call(lambda r: (r / "docs" / "new.txt").write_text("ours\n"))
    (room.root / "docs" / "new.txt").write_text("the owner's\n")
    (room.root / "made.txt").write_text("the owner's\n")
    plan, _ = room.plan()
    assert [(c.path, c.reason) for c in plan.conflicts] == [
        ("docs/new.txt", "changed since by someone else")
    ]
    now = tree_of(room.root)
    with pytest.raises(CheckpointError):
        room.undo()
    assert tree_of(room.root) == now


def test_another_session_s_change_to_a_touched_file_is_a_conflict(room: Room) -> None:
    build(room.root)
    room.call(lambda r: (r / "notes.txt").write_text("ours\n"), turn=1)
    room.call(lambda r: (r / "notes.txt").write_text("theirs\n"), identity="another session")
    plan, _ = room.plan()
    assert [(c.path, c.reason) for c in plan.conflicts] == [
        ("notes.txt", "changed since by someone else")
    ]


def test_what_the_session_never_touched_is_left_alone_and_is_no_conflict(room: Room) -> None:
    build(room.root)
    before = tree_of(room.root)
    room.call(lambda r: (r / "notes.txt").write_text("ours\n"))
    (room.root / "docs" / "a.md").write_text("the owner's edit\n")
    (room.root / "owner.txt").write_text("the owner's new file\n")
    plan, _ = room.plan()
    assert plan.conflicts == ()
    assert [a.path for a in plan.actions] == ["notes.txt"]
    room.undo()
    after = tree_of(room.root)
    assert after["notes.txt"] == before["notes.txt"]
    assert after["docs/a.md"]["bytes"] == b"the owner's edit\n"
    assert after["owner.txt"]["bytes"] == b"the owner's new file\n"


def test_force_overwrites_the_owner_s_edit(room: Room) -> None:
    build(room.root)
    before = tree_of(room.root)
    room.call(lambda r: (r / "notes.txt").write_text("ours\n"))
    (room.root / "notes.txt").write_text("the owner's\n")
    plan, _ = room.plan(force=True)
    assert [(c.path, c.overwritten) for c in plan.conflicts] == [("notes.txt", True)]
    room.undo(force=True)
    assert tree_of(room.root) == before


def test_a_folder_holding_files_made_since_is_kept(room: Room) -> None:
    build(room.root)
    room.call(lambda r: folders_to(r / "new" / "ours.txt").write_text("ours\n"))
    (room.root / "new" / "mine.txt").write_text("the owner's\n")
    plan, _ = room.plan()
    assert [(c.path, c.reason) for c in plan.conflicts] == [
        ("new", "holds files made since by someone else")
    ]
    assert [(a.verb, a.path) for a in plan.actions] == [("remove", "new/ours.txt")]
    with pytest.raises(CheckpointError):
        room.undo()
    room.undo(force=True)  # what can be undone is; the owner's file and its folder stay
    assert sorted(tree_of(room.root / "new")) == ["mine.txt"]
