"""The recorded session read whole, and the scratch copy a replay writes to: the session's
folder copied into a home of its own (a temporary folder, 0700), its log cut back to where
the replay starts. The recorded session is only read, never written.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from ... import layout
from ...session import parse_log
from .tape import Place, Tape

__all__ = ["copy_scratch", "read_tape", "scratch_lines"]


def read_tape(folder: Path) -> Tape:
    """Every epoch of the session in `folder`, oldest first.

    Raises:
        OSError: a file cannot be read.
        TornLog: a log is not whole (`bxctl verify` says more).
    """
    epochs, lines = [], []
    names = [path.name for path in folder.iterdir()]
    found = layout.epochs_in(names)
    for epoch in range(found[-1] + 1 if found else 0):  # a missing one fails to open
        log = folder / layout.log_name(epoch)
        data = log.read_bytes()
        genesis = hashlib.sha256((folder / layout.baseline_name(epoch)).read_bytes()).hexdigest()
        epochs.append(parse_log(data, log, genesis).records)
        lines.append(_lines(data))
    return Tape(epochs, lines)


def copy_scratch(folder: Path, home: Path, start: Place, tape: Tape) -> Path:
    """Copy the session in `folder` into `home`'s sessions, its log cut back to `start` (the
    later epochs' files left out); the copy's folder."""
    sessions = layout.sessions_folder(home)
    sessions.mkdir(mode=0o700, parents=True)
    copy = sessions / folder.name
    epoch, index = start
    later = {
        name
        for later_epoch in range(epoch + 1, len(tape.epochs))
        for name in (layout.log_name(later_epoch), layout.baseline_name(later_epoch))
    }
    shutil.copytree(
        folder,
        copy,
        ignore=lambda _dir, names: [
            n for n in names if n in later or n == layout.INDEX or n.endswith(".lock")
        ],
    )
    kept = sum(len(line) + 1 for line in tape.lines[epoch][:index])
    with open(copy / layout.log_name(epoch), "r+b") as log:
        log.truncate(kept)
    return copy


def scratch_lines(copy: Path, epoch: int, offset: int) -> tuple[list[bytes], int]:
    """The whole lines of the copy's epoch `epoch` from byte `offset`, and the offset past
    them (an epoch not written yet has none)."""
    try:
        with open(copy / layout.log_name(epoch), "rb") as log:
            log.seek(offset)
            data = log.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    return _lines(data[:end]), offset + end


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1] if data else []
