"""The store keeps copies named by their hash, private to brokerd, read back checked, and
never more of a file than it was asked to hold."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from boxmaker.brokerd.checkpoints import CheckpointError, Objects


def test_blobs_are_named_by_their_hash_and_private(tmp_path: Path) -> None:
    objects = Objects(tmp_path / "objects")
    sha = objects.put_bytes(b"hello")
    assert sha == hashlib.sha256(b"hello").hexdigest()
    assert objects.path_of(sha) == tmp_path / "objects" / sha[:2] / sha
    assert os.stat(tmp_path / "objects").st_mode & 0o777 == 0o700
    assert os.stat(objects.path_of(sha)).st_mode & 0o777 == 0o600
    assert objects.put_bytes(b"hello") == sha
    assert (objects.all_ids(), objects.size_of_all()) == ({sha}, 5)
    assert objects.read(sha) == b"hello"
    objects.remove(sha)
    objects.remove(sha)
    assert not objects.has(sha)


def test_a_file_is_copied_never_linked(tmp_path: Path) -> None:
    objects = Objects(tmp_path / "objects")
    source = tmp_path / "f"
    source.write_bytes(b"before")
    with open(source, "rb") as f:
        sha, size = objects.put_file_from_fd(f.fileno()) or ("", 0)
    assert (sha, size) == (hashlib.sha256(b"before").hexdigest(), 6)
    with open(source, "r+b") as f:
        f.write(b"BEFORE")  # edited in place
    assert objects.read(sha) == b"before"
    assert os.stat(objects.path_of(sha)).st_ino != os.stat(source).st_ino


def test_a_file_bigger_than_asked_is_not_kept(tmp_path: Path) -> None:
    objects = Objects(tmp_path / "objects")
    (tmp_path / "f").write_bytes(b"x" * 3_000_000)  # three pieces
    with open(tmp_path / "f", "rb") as f:
        assert objects.put_file_from_fd(f.fileno(), most=2_500_000) is None
    assert list((tmp_path / "objects").iterdir()) == []


def test_a_missing_blob_or_a_name_that_is_no_hash_is_an_error(tmp_path: Path) -> None:
    objects = Objects(tmp_path / "objects")
    with pytest.raises(CheckpointError, match="is missing"):
        objects.read("0" * 64)
    with pytest.raises(CheckpointError, match="is not a SHA-256"):
        objects.read("../../etc/passwd")
