"""Carrying out an undo's plan on a root (`restore`): blocking, race-free, never through a
link. What to do is decided by `plan.py`; this module only does it, and stops rather than
guess when the disk is not as the plan expects.

Strategy: no path string is ever opened. The root is opened by its path (`O_NOFOLLOW`) and
checked to be the folder it was granted as; every folder on the way to a path is opened from
the root's descriptor, one component at a time, with `O_DIRECTORY | O_NOFOLLOW`. A component
that is a link or a file where a folder is expected stops the restore with an error naming
it: the plan removes such a link first when it is the plan's to remove (only ever by
`unlink`, which never follows it), so one still there was planted since. Files and links are
made under a hidden name in their folder (`O_CREAT | O_EXCL | O_NOFOLLOW`, `symlinkat`) and
renamed over their path: a rename replaces a link, it never writes through it. Folders made
are 0700 until everything beneath them is in place, then get their modes, children first.
No set-uid or set-gid bit is ever given back; owners are (fchown), where the file system and
brokerd's rights allow. Every file's bytes are read back through the hash-checked store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from ..files.put import give
from .errors import CheckpointError, RestoreStopped
from .manifest import Entry, Manifest, check_path, parts_of
from .objects import Objects
from .plan import Action, Plan
from .snapshot import Identity, open_root

__all__ = ["SET_ID", "restore"]

SET_ID = stat.S_ISUID | stat.S_ISGID  # never given back
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CANNOT_OWN = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS)
_ATTRIBUTES = ("chmod", "chown")


def restore(
    root: Path,
    identity: Identity | None,
    plan: Plan,
    target: Manifest,
    objects: Objects,
    owner_fallback: tuple[int, int] | None = None,
) -> list[str]:
    """Carry out `plan` (made for `target`) on `root`, whose identity is `identity` (None:
    not checked); the paths changed, in order. What the recorded owner cannot be given
    (brokerd is not root, or the file system keeps no owners) goes to `owner_fallback`
    (None: it stays brokerd's).

    Raises:
        CheckpointError: the plan has conflicts and is not forced, was not made for
            `target`, or the root is not the folder it was granted as; nothing is changed.
        RestoreStopped: the disk is not as the plan expects (a link or a file planted where
            a folder was, a folder gone, a blob damaged) or the file system failed: the
            message names the path; the paths put back until then are in `restored`.
    """
    if plan.stops:
        shown = ", ".join(f"{c.path} ({c.reason})" for c in plan.conflicts[:5])
        raise CheckpointError(f"the undo stops on what others changed since: {shown}")
    for action in plan.actions:
        if action.verb != "remove" and target.get(action.path) != action.entry:
            raise CheckpointError(f"the plan was not made for this checkpoint ({action.path})")
        why = check_path(action.path)
        if why is not None:
            raise CheckpointError(f"the plan's path {action.path!r} {why}")
    root_fd = open_root(root, identity, "nothing is restored")
    hands = _Hands(root_fd, objects, owner_fallback)
    try:
        hands.run(plan.actions)
    finally:
        os.close(root_fd)
    return hands.done


class _Hands:
    """One restore: the root's descriptor, the paths changed so far, the folders made."""

    def __init__(self, root_fd: int, objects: Objects, fallback: tuple[int, int] | None) -> None:
        self.root_fd, self.objects, self.fallback = root_fd, objects, fallback
        self.done: list[str] = []
        self.made: list[tuple[str, Entry]] = []  # folders made 0700, their modes given last

    def run(self, actions: tuple[Action, ...]) -> None:
        shapes = [a for a in actions if a.verb not in _ATTRIBUTES]
        attributes = [a for a in actions if a.verb in _ATTRIBUTES]
        path = ""
        try:
            for action in shapes:
                path = action.path
                self._do(action)
            for path, entry in sorted(self.made, key=lambda m: -m[0].count("/")):
                self._attributes(Action("chmod", path, entry))
            for action in attributes:
                path = action.path
                self._attributes(action)
        except RestoreStopped as exc:
            raise RestoreStopped(str(exc), self.done) from exc.__cause__
        except (OSError, CheckpointError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise RestoreStopped(
                f"the undo stopped at {path}: {reason}; {len(self.done)} paths were put back "
                "before it",
                self.done,
            ) from exc

    def _changed(self, path: str) -> None:
        if not self.done or self.done[-1] != path:
            self.done.append(path)

    def _do(self, action: Action) -> None:
        folder, name = self._parent(action.path)
        try:
            if action.verb == "remove":
                self._remove(folder, name)
            elif action.verb == "mkdir":
                self._mkdir(folder, name, action)
            elif action.verb == "write":
                self._write(folder, name, action.entry)
            elif action.verb == "link":
                self._link(folder, name, action.entry)
            else:
                raise CheckpointError(f"{action.verb!r} is not a restore's action")
            os.fsync(folder)
        finally:
            os.close(folder)
        self._changed(action.path)

    def _parent(self, path: str) -> tuple[int, str]:
        """The folder `path` is in, opened from the root one component at a time and never
        through a link, and its last component."""
        parts = parts_of(path)
        fd = os.open(".", _FOLDER, dir_fd=self.root_fd)
        try:
            for depth, part in enumerate(parts[:-1], 1):
                fd = self._down(fd, part, "/".join(parts[:depth]))
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def _down(self, fd: int, part: str, path: str) -> int:
        """The folder `part` in `fd` (which is closed): never a link nor a file."""
        try:
            below = os.open(part, _FOLDER, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise RestoreStopped(
                    f"{path} is a link or a file now where a folder was: the undo stops rather "
                    "than write through it",
                    (),
                ) from exc
            if exc.errno == errno.ENOENT:
                raise RestoreStopped(f"the folder {path} is gone since the preview", ()) from exc
            raise
        os.close(fd)
        return below

    def _remove(self, folder: int, name: str) -> None:
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(name, dir_fd=folder)
        else:
            os.unlink(name, dir_fd=folder)  # a link itself, never what it points to

    def _mkdir(self, folder: int, name: str, action: Action) -> None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=folder)
        made = self._down(os.dup(folder), name, action.path)
        try:
            self._own(lambda ids: os.fchown(made, *ids), action.entry)
        finally:
            os.close(made)
        self.made.append((action.path, action.entry))

    def _write(self, folder: int, name: str, entry: Entry) -> None:
        hidden = _hidden(name)
        fd = os.open(hidden, _NEW, 0o600, dir_fd=folder)
        try:
            try:
                self.objects.read_into(entry.sha256, fd)
                self._own(lambda ids: os.fchown(fd, *ids), entry)
                os.fchmod(fd, entry.mode & ~SET_ID)  # after the chown, which may clear bits
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(hidden, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(hidden, dir_fd=folder)
            raise

    def _link(self, folder: int, name: str, entry: Entry) -> None:
        hidden = _hidden(name)
        os.symlink(entry.target, hidden, dir_fd=folder)
        try:
            self._own(
                lambda ids: os.chown(hidden, *ids, dir_fd=folder, follow_symlinks=False), entry
            )
            os.rename(hidden, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(hidden, dir_fd=folder)
            raise

    def _attributes(self, action: Action) -> None:
        """A chmod or chown of what is at the path, checked to be of the entry's kind."""
        folder, name = self._parent(action.path)
        entry = action.entry
        try:
            if entry.kind == "link":  # a link's own owner; its mode means nothing
                if action.verb == "chown":
                    self._own(
                        lambda ids: os.chown(name, *ids, dir_fd=folder, follow_symlinks=False),
                        entry,
                    )
            else:
                self._set(folder, name, action)
        finally:
            os.close(folder)
        self._changed(action.path)

    def _set(self, folder: int, name: str, action: Action) -> None:
        entry = action.entry
        flags = _FOLDER if entry.kind == "dir" else _FILE
        try:
            fd = os.open(name, flags, dir_fd=folder)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
                raise RestoreStopped(
                    f"{action.path} is no longer a {entry.kind}: the undo stops", ()
                ) from exc
            raise
        try:
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISDIR(mode) if entry.kind == "dir" else stat.S_ISREG(mode)):
                raise RestoreStopped(
                    f"{action.path} is no longer a {entry.kind}: the undo stops", ()
                )
            if action.verb == "chmod":
                os.fchmod(fd, entry.mode & ~SET_ID)
            else:
                self._own(lambda ids: os.fchown(fd, *ids), entry)
                os.fchmod(fd, entry.mode & ~SET_ID)  # a chown may clear mode bits
        finally:
            os.close(fd)

    def _own(self, change: Callable[[tuple[int, int]], None], entry: Entry) -> None:
        """Give the recorded owner, or the fallback when that cannot be given."""
        try:
            change((entry.uid, entry.gid))
        except OSError as exc:
            if exc.errno not in _CANNOT_OWN:
                raise
            if self.fallback is not None:
                fallback = self.fallback
                give(lambda: change(fallback))


def _hidden(name: str) -> str:
    """A hidden name beside `name`, new each time (within 255 bytes)."""
    return f".{name[:40]}.{secrets.token_hex(4)}.undo"
