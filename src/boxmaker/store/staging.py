"""Files put in place whole: a new session's folder and a new epoch's two files are written
under hidden names (`layout.py`), fsynced, then renamed into place, so that a crash at any point
leaves the old state or the new one whole, never a part. What a crash leaves under a hidden
name is swept at the next start (`sweep_creations`) or resume (`sweep_folder`).

- **A new session**: the baseline and the `session_start` line go into a hidden folder of
  `sessions/`, both fsynced with the folder, which is then renamed to the session's id, and
  `sessions/` fsynced.
- **A new epoch**: the decision is already durable (the old log ends with its `epoch_end`).
  Both files are staged and fsynced; the log is opened for appending (and locked, when the old
  one was) before anything is renamed; then the baseline is renamed into place, then the log
  (the commit: from here it is the current epoch), and the folder is fsynced. A crash before
  the log's rename leaves the old epoch current, ending with its `epoch_end`, and the next
  resume does it all again from there.

Blocking calls; they raise `OSError` as the file system does, which the caller maps.
"""

from __future__ import annotations

import contextlib
import errno
import secrets
from pathlib import Path

from .. import layout
from ..proto import LogRecord, SessionId, TurnEndRecord, dumps
from ..session import NO_LINK, Link, Log, SessionExists, seal
from .fs import FileSystem
from .journal import Journal

__all__ = ["create_folder", "put_in_place", "sweep_creations", "sweep_folder", "write_epoch"]


def create_folder(
    fs: FileSystem, sessions: Path, sid: SessionId, baseline: bytes, line: bytes
) -> Journal:
    """Put a new session's folder in place with epoch 0's `baseline` and first `line`; its
    log open for appending. No staging folder is left behind.

    Raises:
        SessionExists: another creation of the same id won the rename.
        OSError: from the file system; the session is absent.
    """
    final = sessions / sid.value
    staging = sessions / layout.creating_name(sid.value, secrets.token_hex(4))
    log = final / layout.log_name(0)
    try:
        fs.makedirs(sessions)
        fs.mkdir(staging)
        fs.write_new(staging / layout.baseline_name(0), baseline)
        fs.write_new(staging / layout.log_name(0), line)
        fs.fsync_dir(staging)
        put_in_place(fs, staging, final, sid)
        return Journal(fs, log, fs.open_append(log), len(line))
    finally:
        fs.remove_tree(staging)


def put_in_place(fs: FileSystem, staging: Path, final: Path, sid: SessionId) -> None:
    """Rename a session's staged folder (fsynced) to its name, and make the rename durable.

    Raises:
        SessionExists: another session of that id won the rename.
        OSError: from the file system.
    """
    try:
        fs.rename(staging, final)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise SessionExists(sid) from exc
        raise
    fs.fsync_dir(final.parent)


def write_epoch(
    fs: FileSystem,
    folder: Path,
    epoch: int,
    baseline: bytes,
    genesis: str,
    records: list[LogRecord],
    *,
    lock: bool,
) -> tuple[Journal, Log]:
    """Put epoch `epoch` in place with `baseline`'s bytes (whose sha256 is `genesis`) and
    `records` as its log's first lines: its journal (locked when `lock`) and its log as
    `parse_log` would read it.

    Raises:
        OSError: from the file system; no staging file is left behind (one a crash leaves
            is swept by the next resume), and the epoch is not in place unless it was the
            folder's last fsync that failed (the session is then read again from disk).
    """
    link, last_end, lines = Link(0, genesis), NO_LINK, []
    for record in records:
        line, link = seal(dumps(record), link)
        lines.append(line)
        if type(record) is TurnEndRecord:
            last_end = link
    data = b"".join(lines)
    token = secrets.token_hex(4)
    baseline_at = folder / layout.staged_name(layout.baseline_name(epoch), token)
    log_at = folder / layout.staged_name(layout.log_name(epoch), token)
    fd: int | None = None
    try:
        fs.write_new(baseline_at, baseline)
        fs.write_new(log_at, data)
        fd = fs.open_append(log_at)
        if lock:  # a new file: no one else holds it; bxctl rm waits until the turn ends
            fs.lock(fd)
        fs.rename(baseline_at, folder / layout.baseline_name(epoch))
        fs.rename(log_at, folder / layout.log_name(epoch))  # the commit
        fs.fsync_dir(folder)
    except BaseException:
        if fd is not None:
            with contextlib.suppress(OSError):
                fs.close(fd)
        for path in (baseline_at, log_at):
            with contextlib.suppress(OSError):
                fs.unlink(path)
        raise
    journal = Journal(fs, folder / layout.log_name(epoch), fd, len(data))
    journal.held = lock
    return journal, Log(list(records), link, chained_from=0, last_turn_end=last_end)


def sweep_creations(fs: FileSystem, sessions: Path) -> list[str]:
    """Remove the hidden folders of creations that never finished; returns their names."""
    stale = [name for name in fs.list_dir(sessions) if layout.is_creating(name)]
    for name in stale:
        fs.remove_tree(sessions / name)
    return stale


def sweep_folder(fs: FileSystem, folder: Path, names: list[str]) -> list[str]:
    """Remove what a killed loopd left in a session's folder: a switch's staging files, a
    baseline renamed into place for an epoch whose log never was, and a half-written
    replacement of `index.json`. Returns their names."""
    current = max(layout.epochs_in(names), default=0)
    stale = [name for name in names if layout.is_stale(name, current)]
    for name in stale:
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(folder / name)
    return stale
