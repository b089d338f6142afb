"""The files attached for turns to come (`attach`, SPEC section 22), in `<home>/uploads/`:
each as `<sha256>`, and a PDF's text beside it as `<sha256>.text`. Blocking.

A file is written only whole and checked (loopd has every byte, and its hash): a reader sees
it, or nothing. A turn links what it carries into its session's folder, so an upload is only
a waiting room, for any turn that names it: each is removed once older than `KEEP_S` (when
another is kept), and all of them as loopd starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from pathlib import Path

from attrs import frozen

from .. import layout
from .fs import FileSystem, storage_errors

__all__ = [
    "KEEP_S",
    "Upload",
    "UploadsFull",
    "clear_uploads",
    "keep_upload",
    "keep_upload_text",
    "read_upload",
]

KEEP_S = 3600.0  # an upload is removed this long after it was attached
_KEEPING = threading.Lock()


@frozen
class Upload:
    """An attached file read back: its bytes, and its PDF's text (None for another file)."""

    data: bytes
    text: str | None


class UploadsFull(Exception):
    """The uploads hold as much as they may; the message says how much."""


def keep_upload(
    home: Path, sha256: str, data: bytes, text: str | None, most: int | None = None
) -> None:
    """Keep an attached file (its text first, so a file is never there without it), once
    those older than `KEEP_S` are removed.

    Raises:
        UploadsFull: with it, the uploads would hold more than `most` bytes.
        StorageError: naming the file.
    """
    fs = FileSystem()
    folder = layout.uploads_folder(home)
    with storage_errors(folder):
        fs.makedirs(folder)
    with _KEEPING:  # one keep at a time: the bound holds for keeps made at once too
        held = _prune(folder, time.time() - KEEP_S)
        if most is not None and held + len(data) + len((text or "").encode()) > most:
            raise UploadsFull(f"the attached files waiting for a turn hold {held:,} bytes already")
        if text is not None:
            path = layout.upload_file(home, sha256, ".text")
            with storage_errors(path):
                fs.replace_file(path, text.encode())
        path = layout.upload_file(home, sha256)
        with storage_errors(path):
            fs.replace_file(path, data)


def keep_upload_text(home: Path, sha256: str, text: str) -> None:
    """Keep the text loopd made of an attached file later (an image, as a vision server
    described it), beside it.

    Raises:
        StorageError: naming the file.
    """
    path = layout.upload_file(home, sha256, ".text")
    with storage_errors(path):
        FileSystem().replace_file(path, text.encode())


def read_upload(home: Path, sha256: str) -> Upload | None:
    """The attached file of that hash, None when there is none (never attached, removed, or
    not what its hash says).

    Raises:
        StorageError: the file could not be read.
    """
    fs = FileSystem()
    path = layout.upload_file(home, sha256)
    with storage_errors(path, reading=True):
        data = fs.read_if_there(path)
    if data is None or hashlib.sha256(data).hexdigest() != sha256:
        return None
    text_path = layout.upload_file(home, sha256, ".text")
    with storage_errors(text_path, reading=True):
        text = fs.read_if_there(text_path)
    try:
        return Upload(data, None if text is None else text.decode())
    except UnicodeDecodeError:
        return None


def clear_uploads(home: Path) -> None:
    """Remove every upload (as loopd starts: no turn can name one from before)."""
    _prune(layout.uploads_folder(home), float("inf"))


def _prune(folder: Path, before: float) -> int:
    """Remove the uploads last changed before `before`; the bytes of those left."""
    held = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                stat = entry.stat(follow_symlinks=False)
                if stat.st_mtime < before:
                    os.unlink(entry.path)
                else:
                    held += stat.st_size
    return held
