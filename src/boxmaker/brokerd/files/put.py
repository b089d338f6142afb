"""A file written whole or not at all (`put_file`), and whom what the file tools make belongs
to (`Owner`): under root, the sandbox's user in the workspace, the folder's owner elsewhere; a
replaced file keeps its own. A blocking function of the file tools (`file_tools.py`), beside the
walk that found the folder (`_walk.py`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable

__all__ = ["FOLDERS", "Owner", "give", "owner_in", "put_file"]


def put_file(folder: int, name: str, data: bytes, mode: int | None, owner: Owner = None) -> None:
    """Put `data` in place as `name` in `folder` (a descriptor from `Walk.folder`), whole or
    not at all: written to `.<name>.<random>.tmp` (created exclusively), fsynced, renamed over
    `name`, the folder fsynced. `mode` is the replaced file's (None: a new file, 0666 less the
    umask), never with its set-uid or set-gid bit; `owner` the (uid, gid) the file gets (a
    replaced one's own, or the sandbox's user's; FOLDERS: the folder's owner's; None:
    brokerd's). On an error nothing is left
    under the hidden name.

    Raises:
        OSError: from the file system; `name` is as it was.
    """
    hidden = f".{name[:60]}.{secrets.token_hex(4)}.tmp"  # within 255 bytes
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(hidden, flags, 0o666 if mode is None else 0o600, dir_fd=folder)
    try:
        try:
            if owner is not None:
                ids = owner_in(folder, owner)
                give(lambda: os.fchown(fd, *ids))
            if mode is not None:
                os.fchmod(fd, mode & ~(stat.S_ISUID | stat.S_ISGID))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(hidden, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(hidden, dir_fd=folder)
        raise
    os.fsync(folder)


FOLDERS = "the folder's owner"  # an `Owner`: what is made belongs to whom the folder does
Owner = tuple[int, int] | str | None  # (uid, gid), FOLDERS, or None: brokerd's user


def owner_in(folder: int, owner: tuple[int, int] | str) -> tuple[int, int]:
    """The (uid, gid) of what is made in `folder` for `owner`."""
    if isinstance(owner, tuple):
        return owner
    st = os.fstat(folder)
    return (st.st_uid, st.st_gid)


def give(change: Callable[[], None]) -> None:
    """Change an owner, where the file system keeps owners (else nothing changes: one that
    cannot, such as FAT, has no owner to give)."""
    try:
        change()
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
