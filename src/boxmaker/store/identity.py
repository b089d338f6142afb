"""A session's identity: its id *and* its creation, the SHA-256 of epoch 0's first line (its
`session_start`, which holds when it was made). Two sessions with the same config have the
same baseline but never the same first line, so a session made again under a removed one's id
is another identity; brokerd keeps what it holds for a session (its grants, its interpreter)
for that identity alone. Each later epoch names it in its `session_start` as `origin`, so the
current epoch alone says it (docs/storage.md, "The session's identity").
"""

from __future__ import annotations

import logging
from pathlib import Path

from .. import layout
from ..proto import SessionStartRecord
from ..session import Exposed, TornLog, session_start, sha256_hex
from .fs import FileSystem

__all__ = ["identity_of", "session_identity"]

log = logging.getLogger("boxmaker.store")


def session_identity(fs: FileSystem, folder: Path, start: SessionStartRecord, first: bytes) -> str:
    """The identity of the session in `folder` whose current epoch opens with `start`, the
    line `first`: the `origin` a later epoch names; epoch 0's first line's hash; for a later
    epoch opened before origins were kept, epoch 0's first line read from its log, or, that
    log gone or torn, its own first line's (another identity: what brokerd held for the
    session is lost, never given to another)."""
    if start.epoch != 0 and start.origin:
        return start.origin
    if start.epoch != 0:
        path = folder / layout.log_name(0)
        try:
            line = fs.read_first_line(path)
        except (OSError, Exposed) as error:
            log.warning(
                "%s: cannot read the session's first line (%s); epoch %d stands for it",
                path,
                error,
                start.epoch,
            )
        else:
            if line.endswith(b"\n"):
                first = line
    return sha256_hex(first[: first.find(b"\n") + 1])


def identity_of(folder: Path) -> str:
    """The identity of the session in `folder` as its files say now ("" when they cannot)."""
    fs = FileSystem()
    epochs = layout.epochs_in(_names(folder))
    if not epochs:
        return ""
    path = folder / layout.log_name(max(epochs))
    try:
        first = fs.read_first_line(path)
        start = session_start(first, path)
    except (OSError, Exposed, TornLog):
        return ""
    return session_identity(fs, folder, start, first)


def _names(folder: Path) -> list[str]:
    try:
        return [entry.name for entry in folder.iterdir()]
    except OSError:
        return []
