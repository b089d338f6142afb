"""What loopd trusts on disk, and how it opens files without being led elsewhere.

One rule: loopd uses a file or folder only if its own user owns it and no one else can write
it (no group or other write bit). Whoever else could write the home, `sessions/`, `memory/`
or a log could put words in the owner's sessions, read what the owner says, or swap a file
for a link to one of the owner's other files. Files are opened with `O_NOFOLLOW`, and folders
inside the home are looked at with `lstat`, so a link is never followed there; the home and
the socket's folder, named by the owner's config, may be links, made by the owner (or root).

`problems_at_start` is loopd's check before it touches anything; `open_checked` is how the
store opens every file it reads or appends to; `log_changed` is the check before each append
that the open log is still the file at its path, of the size loopd wrote.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .. import layout
from ..session import Exposed

__all__ = ["exposure", "log_changed", "open_checked", "problems_at_start"]

_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def exposure(path: Path, *, follow: bool = False, folder: bool = True) -> str | None:
    """What exposes `path` to another user, as the end of a sentence naming it; None when it is
    fine or absent. `follow`: the path may be a link (made by loopd's user or root) to what is
    checked; `folder`: it must be a folder (else a regular file)."""
    uid = os.geteuid()
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if not follow:
                return "is a symbolic link, and loopd does not follow links inside its home"
            if st.st_uid not in (uid, 0):
                return f"is a symbolic link owned by uid {st.st_uid}, not by loopd's user"
            st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be looked at: {exc.strerror or exc}"
    return stat_problem(st, folder=folder, uid=uid)


def stat_problem(st: os.stat_result, *, folder: bool, uid: int | None = None) -> str | None:
    """`problem` for what `stat` already said."""
    uid = os.geteuid() if uid is None else uid
    if folder and not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if not folder and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by loopd's user (uid {uid})"
    if st.st_mode & _WRITABLE_BY_OTHERS:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def problems_at_start(home: Path, socket_folder: Path) -> list[str]:
    """Everything under the home (and the socket's folder) that loopd must not use, each as
    a sentence naming the path; read only."""
    found: list[tuple[Path, str | None]] = [
        (home, exposure(home, follow=True)),
        (socket_folder, exposure(socket_folder, follow=True)),
    ]
    memory, sessions = layout.memory_folder(home), layout.sessions_folder(home)
    found += [(memory, exposure(memory)), (sessions, said := exposure(sessions))]
    core = layout.core_memory(home)
    found.append((core, exposure(core, folder=False)))
    names = _listed(sessions, found) if said is None else []
    for name in names:
        if layout.is_hidden(name):
            continue  # not a session: a creation's staging folder, or one set aside
        folder = sessions / name
        found.append((folder, said := exposure(folder)))
        if said is None:
            for file in _listed(folder, found):
                found.append((folder / file, exposure(folder / file, folder=False)))
    return [f"{path} {said}" for path, said in found if said is not None]


def _listed(folder: Path, found: list[tuple[Path, str | None]]) -> list[str]:
    """The names in `folder` (none when it is absent); one that cannot be listed is a problem."""
    try:
        return sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        found.append((folder, f"cannot be listed: {exc.strerror or exc}"))
        return []


def open_checked(path: Path, flags: int, mode: int = 0o600) -> int:
    """`os.open` without following a link at `path`, refusing a file that is not loopd's
    user's alone (the descriptor is checked, so what was checked is what is used), nor a FIFO
    or a device (it never waits to open one).

    Raises:
        Exposed: a link, not a regular file, another owner, or writable by others.
        OSError: as `os.open` does otherwise.
    """
    try:  # O_NONBLOCK: a FIFO planted at the path must not hold the open (ignored for files)
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Exposed(path, "is a symbolic link, and loopd does not follow it") from exc
        raise
    try:
        said = stat_problem(os.fstat(fd), folder=False)
    except BaseException:
        os.close(fd)
        raise
    if said is not None:
        os.close(fd)
        raise Exposed(path, said)
    return fd


def log_changed(fd: int, path: Path, size: int) -> str | None:
    """What happened to the log loopd holds open as `fd`, written up to `size` bytes, if it is
    no longer the file at `path` of that size; None when nothing did."""
    held = os.fstat(fd)
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        return "was removed"
    if (there.st_dev, there.st_ino) != (held.st_dev, held.st_ino):
        return "was replaced by another file (an editor saving over it?)"
    if held.st_size < size:
        return f"was cut from {size} to {held.st_size} bytes"
    if held.st_size > size:
        return f"grew from {size} to {held.st_size} bytes written by something else"
    return None
