"""Opening an epoch on disk: `<n>.baseline.json` and `<n>.jsonl` put in place so that a crash
at any point leaves either the old epoch current or the new one whole.

The decision is already durable when this runs: the old log ends with its `epoch_end`. Both
new files are written under hidden staging names (`.<name>.staged-<random>`) and fsynced; the
log is opened for appending (and locked, when the old one was) before anything is renamed;
then the baseline is renamed into place, then the log (the commit: from here `<n>.jsonl` is
the current epoch), and the folder is fsynced. A crash before the log's rename leaves the old
epoch current, ending with its `epoch_end`, and the next resume does it all again from there;
leftover staging files are swept then. Blocking calls: the store runs them in a worker thread.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

from attrs import frozen

from ..proto import LogRecord, TurnEndRecord, dumps
from ..session import Link, Log, baseline_name, epochs_in, log_name, seal
from .fs import FileSystem

__all__ = ["STAGED", "Staged", "sweep", "write_epoch"]

STAGED = ".staged-"  # in the hidden names of files being written: `.1.jsonl.staged-9f2c`


@frozen
class Staged:
    """A new epoch's log, in place: open for appending at `fd`, `size` bytes, and its records
    as `parse_log` would read them."""

    fd: int
    size: int
    log: Log
    path: Path


def write_epoch(
    fs: FileSystem,
    folder: Path,
    epoch: int,
    baseline: bytes,
    genesis: str,
    records: list[LogRecord],
    *,
    lock: bool,
) -> Staged:
    """Put epoch `epoch` in place with `baseline`'s bytes (whose sha256 is `genesis`) and
    `records` as its log's first lines.

    Raises:
        OSError: from the file system; no staging file is left behind (one a crash leaves
            is swept by the next resume), and the epoch is not in place unless it was the
            folder's last fsync that failed (the session is then read again from disk).
    """
    link, last_end, lines = Link(0, genesis), Link(0, ""), []
    for record in records:
        line, link = seal(dumps(record), link)
        lines.append(line)
        if type(record) is TurnEndRecord:
            last_end = link
    data = b"".join(lines)
    token = secrets.token_hex(4)
    staged_baseline = folder / f".{baseline_name(epoch)}{STAGED}{token}"
    staged_log = folder / f".{log_name(epoch)}{STAGED}{token}"
    fd: int | None = None
    try:
        fs.write_new(staged_baseline, baseline)
        fs.write_new(staged_log, data)
        fd = fs.open_append(staged_log)
        if lock:  # a new file: no one else holds it; bxctl rm waits until the turn ends
            fs.lock(fd)
        fs.rename(staged_baseline, folder / baseline_name(epoch))
        fs.rename(staged_log, folder / log_name(epoch))  # the commit
        fs.fsync_dir(folder)
    except BaseException:
        if fd is not None:
            with contextlib.suppress(OSError):
                fs.close(fd)
        for path in (staged_baseline, staged_log):
            with contextlib.suppress(OSError):
                fs.unlink(path)
        raise
    log = Log(list(records), link, chained_from=0, last_turn_end=last_end)
    return Staged(fd, len(data), log, folder / log_name(epoch))


def sweep(fs: FileSystem, folder: Path, names: list[str]) -> list[str]:
    """Remove what a killed loopd left in a session's folder: a switch's staging files, a
    baseline renamed into place for an epoch whose log never was, and a half-written
    replacement of `index.json` (`.index.json.<random>`). Returns their names."""
    current = max(epochs_in(names), default=0)
    stale = [
        name for name in names
        if name.startswith(".") and (STAGED in name or name.startswith(".index.json."))
    ]  # fmt: skip
    for name in names:
        number, _, rest = name.partition(".")
        if rest == "baseline.json" and number.isascii() and number.isdigit():
            stale += [name] if int(number) > current else []
    for name in stale:
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(folder / name)
    return stale
