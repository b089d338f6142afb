"""The book's files on disk (`book.py`): read with a bound and never through a link, each
line of a JSON-lines log parsed or named as the one that is damaged, and a file replaced
whole (a temp file fsynced and renamed over, the folder fsynced). Blocking.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...store import FileSystem
from .errors import CheckpointError

__all__ = ["MAX_LINE", "MAX_LOG", "load_json_lines", "read_bounded", "replace_file"]

MAX_LOG = 64 << 20  # about 200,000 checkpoints
MAX_LINE = 64 << 10
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def read_bounded(path: Path, most: int) -> bytes | None:
    """The bytes of `path`, or None when there is no such file.

    Raises:
        CheckpointError: it is a link, or holds more than `most` bytes.
        OSError: from the file system.
    """
    try:
        fd = os.open(path, _READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"{path} cannot be read ({exc.strerror}): is it a link?") from exc
    try:
        size = os.fstat(fd).st_size
        if size > most:
            raise CheckpointError(f"{path} holds {size:,} bytes, more than the {most:,} allowed")
        pieces: list[bytes] = []
        got = 0
        while piece := os.read(fd, 1 << 20):
            pieces.append(piece)
            got += len(piece)
            if got > most:
                raise CheckpointError(f"{path} grew past the {most:,} bytes allowed")
        return b"".join(pieces)
    finally:
        os.close(fd)


def load_json_lines(path: Path) -> list[tuple[int, Any]]:
    """Each line of `path` (a JSON-lines file) with its number, parsed. A last line with no
    end is the append a crash cut short: it is cut off the file and left out.

    Raises:
        CheckpointError: a line is too long or not JSON (the message names it), or the file
            is a link or holds more than `MAX_LOG` bytes.
        OSError: from the file system.
    """
    data = read_bounded(path, MAX_LOG)
    if data is None:
        return []
    whole = data.rfind(b"\n") + 1
    if whole < len(data):
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, whole)
            os.fsync(fd)
        finally:
            os.close(fd)
    found: list[tuple[int, Any]] = []
    for number, line in enumerate(data[:whole].split(b"\n")[:-1], 1):
        if len(line) > MAX_LINE:
            raise CheckpointError(f"{path} line {number} is longer than {MAX_LINE:,} bytes")
        try:
            found.append((number, json.loads(line)))
        except (ValueError, RecursionError) as exc:
            raise CheckpointError(f"{path} line {number} is not JSON: {exc}") from None
    return found


def replace_file(path: Path, data: bytes) -> None:
    """Put `data` in place as `path` (0600), whole or not at all: the store's own replace (a
    temp file created exclusively, never through a link, fsynced, renamed over, the folder
    fsynced).

    Raises:
        OSError: from the file system; `path` is as it was.
    """
    FileSystem().replace_file(path, data)
