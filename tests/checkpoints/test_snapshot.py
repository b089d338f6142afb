"""A snapshot stops early past its bounds, spares reading files its stat cache vouches for
(and reads again what the cache cannot vouch for), and shrugs off files that vanish mid-walk.

What the cache cannot see, and no test here can make: a change that leaves a file's size,
modification time and change time all as they were (made with the clock set back, or on a
file system that keeps no change times)."""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

import pytest

from boxmaker.brokerd.checkpoints import Manifest, Objects, OverBounds, StatCache, snapshot
from boxmaker.brokerd.checkpoints.snapshot import amount

snapshot_module = importlib.import_module("boxmaker.brokerd.checkpoints.snapshot")
LATER = 10 * 10**9  # a walk this far in the future sees every file as settled


class CountingObjects(Objects):
    """The store, counting the files a snapshot reads."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.reads = 0

    def put_file_from_fd(self, source: int, *, most: int | None = None) -> tuple[str, int] | None:
        self.reads += 1
        return super().put_file_from_fd(source, most=most)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("aaaa")
    (root / "sub" / "b.txt").write_text("bbbb")
    (root / "sub" / "c.txt").write_text("cccc")
    return root


@pytest.fixture
def objects(tmp_path: Path) -> CountingObjects:
    return CountingObjects(tmp_path / "objects")


def snap(
    root: Path,
    objects: Objects,
    cache: StatCache,
    *,
    now_ns: int | None = None,
    max_files: int = 100,
    max_bytes: int = 1 << 20,
) -> Manifest | OverBounds:
    return snapshot(root, None, objects, max_files=max_files, max_bytes=max_bytes, cache=cache,
                    now_ns=now_ns)  # fmt: skip


def test_more_files_than_allowed_stops_the_snapshot(root: Path, objects: Objects) -> None:
    assert snap(root, objects, StatCache(), max_files=3) == OverBounds("holds more than 3 files")
    assert isinstance(snap(root, objects, StatCache(), max_files=4), dict)  # 3 files, 1 folder


def test_more_bytes_than_allowed_stops_the_snapshot(root: Path, objects: Objects) -> None:
    assert snap(root, objects, StatCache(), max_bytes=11) == OverBounds("holds more than 11 bytes")
    assert isinstance(snap(root, objects, StatCache(), max_bytes=12), dict)


def test_a_file_that_grows_while_read_is_counted_as_read(
    root: Path, objects: CountingObjects, monkeypatch: pytest.MonkeyPatch
) -> None:
    def grow(path: str) -> None:
        if path == "a.txt":
            (root / "a.txt").write_bytes(b"x" * 5000)

    monkeypatch.setattr(snapshot_module, "between", grow)
    over = snap(root, objects, StatCache(), max_bytes=4096)
    assert over == OverBounds("holds more than 4 KiB")
    assert all(b"x" not in objects.read(sha) for sha in objects.all_ids())  # none of it kept
    assert [p.name for p in objects.folder.iterdir() if p.is_file()] == []  # nor a temp file


def test_the_bounds_are_said_in_words() -> None:
    assert amount(1 << 30) == "1 GiB"
    assert amount(512 << 20) == "512 MiB"
    assert amount(3000) == "3,000 bytes"


def test_an_unchanged_tree_is_not_read_again(root: Path, objects: CountingObjects) -> None:
    cache = StatCache()
    later = time.time_ns() + LATER
    first = snap(root, objects, cache, now_ns=later)
    assert objects.reads == 3
    assert snap(root, objects, cache, now_ns=later) == first
    assert objects.reads == 3


def test_a_file_changed_just_before_the_walk_is_read_again(
    root: Path, objects: CountingObjects
) -> None:
    cache = StatCache()
    snap(root, objects, cache)  # the files were written a moment ago: racy, so not cached
    snap(root, objects, cache)
    assert objects.reads == 6


def test_an_edit_in_place_of_the_same_size_is_seen_by_its_change_time(
    root: Path, objects: CountingObjects
) -> None:
    cache = StatCache()
    later = time.time_ns() + LATER
    snap(root, objects, cache, now_ns=later)
    st = os.stat(root / "a.txt")
    for _ in range(1_000_000):  # written again until the file system's clock stamps a new tick
        with open(root / "a.txt", "r+b") as f:
            f.write(b"AAAA")
        os.utime(root / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))  # the same size, mtime
        if os.stat(root / "a.txt").st_ctime_ns != st.st_ctime_ns:
            break
    assert os.stat(root / "a.txt").st_ctime_ns != st.st_ctime_ns
    second = snap(root, objects, cache, now_ns=later)
    assert isinstance(second, dict)
    assert objects.reads == 4
    assert objects.read(second["a.txt"].sha256) == b"AAAA"


def test_a_cached_file_whose_blob_is_gone_is_read_again(
    root: Path, objects: CountingObjects
) -> None:
    cache = StatCache()
    later = time.time_ns() + LATER
    first = snap(root, objects, cache, now_ns=later)
    assert isinstance(first, dict)
    objects.remove(first["a.txt"].sha256)  # trimmed away
    assert snap(root, objects, cache, now_ns=later) == first
    assert objects.reads == 4
    assert objects.has(first["a.txt"].sha256)


def test_a_snapshot_stopped_early_leaves_the_cache_as_it_was(
    root: Path, objects: CountingObjects
) -> None:
    cache = StatCache()
    snap(root, objects, cache, now_ns=time.time_ns() + LATER)
    lines = dict(cache.lines)
    assert len(lines) == 3
    assert isinstance(snap(root, objects, cache, max_files=1), OverBounds)
    assert cache.lines == lines


def test_files_and_folders_that_vanish_mid_walk_are_left_out(
    root: Path, objects: CountingObjects, monkeypatch: pytest.MonkeyPatch
) -> None:
    def vanish(path: str) -> None:
        if path == "a.txt":
            (root / "a.txt").unlink()
        if path == "sub":
            for name in os.listdir(root / "sub"):
                (root / "sub" / name).unlink()
            (root / "sub").rmdir()

    monkeypatch.setattr(snapshot_module, "between", vanish)
    assert snap(root, objects, StatCache()) == {}


def test_links_and_modes_are_recorded_as_they_are(root: Path, objects: Objects) -> None:
    (root / "link").symlink_to("sub/b.txt")
    (root / "sub").chmod(0o700)
    (root / "a.txt").chmod(0o640)
    manifest = snap(root, objects, StatCache())
    assert isinstance(manifest, dict)
    assert (manifest["link"].kind, manifest["link"].target) == ("link", "sub/b.txt")
    assert (manifest["sub"].kind, manifest["sub"].mode) == ("dir", 0o700)
    assert (manifest["a.txt"].mode, manifest["a.txt"].size) == (0o640, 4)
    assert sorted(manifest) == ["a.txt", "link", "sub", "sub/b.txt", "sub/c.txt"]
