"""The content-addressed store of the checkpoints (`Objects`): every file's bytes and every
manifest, named by the SHA-256 of its bytes, at `objects/<sha[:2]>/<sha>`. Blocking calls.

A blob is written whole or not at all (a hidden temp file, fsynced, renamed into place) and
is a copy, never a hard link: a file edited in place later cannot change a checkpoint. Every
read checks the hash, so a blob damaged on disk is an error naming it, never the wrong bytes
put back. Memory stays bounded: files are copied in pieces of 1 MiB.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from .errors import CheckpointError
from .manifest import is_id

__all__ = ["CHUNK", "Objects"]

CHUNK = 1 << 20
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class Objects:
    """The store in `folder` (made 0700 if missing; blobs are 0600). Not for two writers at
    once in one process without a lock; two putting the same blob is harmless.

    Methods raise `OSError` from the file system (full disk, ...) unless they say otherwise,
    and `CheckpointError` for a name that is not a SHA-256.
    """

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        self.folder = folder
        self._unsynced: set[str] = set()  # sub-folders given a name since the last `sync`
        self._present: set[str] = set()  # blobs seen stored: brokerd alone removes them
        self._total: int | None = None  # the bytes of every blob, counted once, then kept

    def path_of(self, sha: str) -> Path:
        """Where the blob `sha` lives (whether or not it is there)."""
        if not is_id(sha):
            raise CheckpointError(f"{sha!r} is not a SHA-256 in hex (64 digits 0-9, a-f)")
        return self.folder / sha[:2] / sha

    def has(self, sha: str) -> bool:
        """Whether the blob `sha` is stored (its bytes are not checked). Asked of every file a
        snapshot finds unchanged, so a blob seen stored is remembered (only `remove` takes
        one away; one removed behind brokerd's back is a restore's error, named)."""
        if sha in self._present:
            return True
        if self.path_of(sha).is_file():
            self._present.add(sha)
            return True
        return False

    def put_bytes(self, data: bytes) -> str:
        """Store `data`; its SHA-256."""
        sha = hashlib.sha256(data).hexdigest()
        if not self.has(sha):
            temp, fd = self._temp()
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                self._keep(temp, fd, sha)
            finally:
                _discard(temp, fd)
        return sha

    def put_file_from_fd(self, source: int, *, most: int | None = None) -> tuple[str, int] | None:
        """Copy what is left to read from `source` into the store, hashing as it goes; its
        SHA-256 and size, or None when it holds more than `most` bytes (nothing is kept)."""
        temp, fd = self._temp()
        try:
            digest, size = hashlib.sha256(), 0
            while piece := os.read(source, CHUNK):
                size += len(piece)
                if most is not None and size > most:
                    return None
                digest.update(piece)
                view = memoryview(piece)
                while view:
                    view = view[os.write(fd, view) :]
            sha = digest.hexdigest()
            if not self.has(sha):
                self._keep(temp, fd, sha)
            return sha, size
        finally:
            _discard(temp, fd)

    def read(self, sha: str) -> bytes:
        """The bytes of blob `sha`, checked against it.

        Raises:
            CheckpointError: the blob is missing or its bytes are not the ones stored.
        """
        pieces: list[bytes] = []
        self._stream(sha, pieces.append)
        return b"".join(pieces)

    def read_into(self, sha: str, target: int) -> int:
        """Write the bytes of blob `sha` to the descriptor `target` in pieces (memory stays
        bounded); how many. What was written must be thrown away on an error.

        Raises:
            CheckpointError: the blob is missing or its bytes are not the ones stored.
        """

        def write(piece: bytes) -> None:
            view = memoryview(piece)
            while view:
                view = view[os.write(target, view) :]

        return self._stream(sha, write)

    def sync(self) -> None:
        """Make the names of the blobs stored since the last call durable (their bytes were
        fsynced when stored): called before a record names them."""
        for name in sorted(self._unsynced):
            fd = os.open(self.folder / name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._unsynced.clear()

    def sizes(self) -> dict[str, int]:
        """Every stored blob's size in bytes, by SHA-256."""
        found: dict[str, int] = {}
        for sub in self.folder.iterdir():
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            for blob in sub.iterdir():
                if is_id(blob.name) and blob.name.startswith(sub.name):
                    with contextlib.suppress(FileNotFoundError):
                        found[blob.name] = blob.stat().st_size
        return found

    def size_of_all(self) -> int:
        """The bytes all stored blobs take (their sizes, not the disk's blocks): counted on
        the disk once, then kept up to date by each blob stored and removed (a trim asks it
        after every call)."""
        if self._total is None:
            self._total = sum(self.sizes().values())
        return self._total

    def all_ids(self) -> set[str]:
        """The SHA-256 of every stored blob."""
        return set(self.sizes())

    def remove(self, sha: str) -> None:
        """Remove blob `sha` (nothing if it is not there)."""
        self._present.discard(sha)
        path = self.path_of(sha)
        with contextlib.suppress(FileNotFoundError):
            size = path.stat().st_size
            path.unlink()
            if self._total is not None:
                self._total -= size

    def _temp(self) -> tuple[Path, int]:
        temp = self.folder / f".{secrets.token_hex(8)}.tmp"
        return temp, os.open(temp, _NEW, 0o600)

    def _keep(self, temp: Path, fd: int, sha: str) -> None:
        """Put the written temp file in place as blob `sha`."""
        os.fsync(fd)
        size = os.fstat(fd).st_size
        final = self.path_of(sha)
        final.parent.mkdir(mode=0o700, exist_ok=True)
        os.rename(temp, final)
        self._unsynced.add(sha[:2])
        self._present.add(sha)
        if self._total is not None:
            self._total += size

    def _stream(self, sha: str, sink: Callable[[bytes], object]) -> int:
        path = self.path_of(sha)
        try:
            fd = os.open(path, _READ)
        except FileNotFoundError:
            raise CheckpointError(f"the stored blob {sha} is missing (removed by hand?)") from None
        try:
            digest, size = hashlib.sha256(), 0
            while piece := os.read(fd, CHUNK):
                digest.update(piece)
                size += len(piece)
                sink(piece)
        finally:
            os.close(fd)
        if digest.hexdigest() != sha:
            raise CheckpointError(
                f"the stored blob {sha} is damaged: its bytes hash to {digest.hexdigest()}"
            )
        return size


def _discard(temp: Path, fd: int) -> None:
    """Close the temp file and remove it unless it was renamed into place."""
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        temp.unlink()
