"""Who owns what the agent makes, and what it may never leave behind.

The sandbox's user. Under root nothing runs as root: every process brokerd starts for a tool
or an MCP server becomes `[sandbox] user` first (`launch.py`). Its default is the account
`boxmaker-sandbox` where the machine has one, else uid and gid 65533 with no account: in the
range (65000 to 65533) that Debian's policy reserves and never gives an account, outside
systemd's dynamic users (61184 to 65519) and `nobody` (65534, shared by many daemons), and
within the 16 bits that every file system and user namespace maps. A uid that names another
account is refused, so the sandbox never shares one.

What it owns. Under root the workspace is the sandbox user's: `take_over` gives it every entry
of the workspace at brokerd's start (but those of a root inside it that is closed or may not
be written: the sandbox never writes them), and the file tools give it what they create
anywhere (`owner` of `put_file`); a file they replace keeps its owner.

What never survives: a set-uid or set-gid bit on a file in the workspace (`sweep_setuid`,
after every sandboxed call; `put_file` drops them from what it writes). A set-uid file the
sandbox made would run as its user, outside the sandbox, for whoever can reach it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
from collections.abc import Callable, Collection

from .roots import Identity

__all__ = ["DEFAULT_ACCOUNT", "DEFAULT_UID", "sandbox_user", "sweep_setuid", "take_over"]

DEFAULT_ACCOUNT = "boxmaker-sandbox"
DEFAULT_UID = 65533
_SETID = stat.S_ISUID | stat.S_ISGID
_DEEPEST = 256  # folders below the workspace a walk goes into
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_Visit = Callable[[int, str, os.stat_result], int]  # (folder, name, lstat) -> a count


def sandbox_user(setting: str) -> tuple[int, int] | str:
    """The (uid, gid) `[sandbox] user` names (a name, `uid` or `uid:gid`; "" for the default),
    or why it names none that may run the sandbox."""
    if not setting:
        try:
            account = pwd.getpwnam(DEFAULT_ACCOUNT)
            return account.pw_uid, account.pw_gid
        except KeyError:
            pass
        with contextlib.suppress(KeyError):
            taken = pwd.getpwuid(DEFAULT_UID).pw_name
            return (f"uid {DEFAULT_UID}, the sandbox's by default, is the account {taken!r}: "
                    "set [sandbox] user to an account of its own")  # fmt: skip
        return DEFAULT_UID, DEFAULT_UID
    uid_text, _, gid_text = setting.partition(":")
    if uid_text.isdigit() and (not gid_text or gid_text.isdigit()):
        uid = int(uid_text)
        ids = (uid, int(gid_text) if gid_text else uid)
    else:
        try:
            account = pwd.getpwnam(setting)
        except KeyError:
            return f"[sandbox] user {setting!r} is no account of this machine"
        ids = (account.pw_uid, account.pw_gid)
    if 0 in ids:
        return f"[sandbox] user {setting!r} is root (uid or gid 0): the sandbox never runs as root"
    return ids


def take_over(workspace: str, user: tuple[int, int], keep: Collection[Identity]) -> int:
    """Give `user` the workspace and every entry in it (links themselves, never what they lead
    to), but the folders of `keep` and what is in them; how many entries changed owner.
    Race-free: each folder is opened beneath the one above it, never through a link.

    Raises:
        OSError: the workspace cannot be opened.
    """
    top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        changed = _own(top, None, user)
        return changed + _walk(top, 0, keep, lambda fd, name, st: _own(fd, name, user, st))
    finally:
        os.close(top)


def sweep_setuid(workspace: str, keep: Collection[Identity] = ()) -> list[str]:
    """Clear every set-uid and set-gid bit on the files of the workspace (a folder's set-gid
    only shares its group, and stays), skipping the folders of `keep`; the paths cleared.

    Raises:
        OSError: the workspace cannot be opened.
    """
    cleared: list[str] = []
    top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def clear(folder: int, name: str, st: os.stat_result) -> int:
        if stat.S_ISDIR(st.st_mode) or not st.st_mode & _SETID or stat.S_ISLNK(st.st_mode):
            return 0
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        try:  # chmod through the descriptor: the very file that was looked at
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & ~_SETID)
            cleared.append(name)
        except PermissionError:  # not brokerd's to change: nor could the sandbox have set it
            pass
        finally:
            os.close(fd)
        return 1

    try:
        _walk(top, 0, keep, clear)
    finally:
        os.close(top)
    return cleared


def _walk(folder: int, depth: int, keep: Collection[Identity], visit: _Visit) -> int:
    """Call `visit(folder, name, lstat)` for every entry beneath `folder`, depth first, never
    through a link nor into a folder of `keep`; the sum of what it returned."""
    total = 0
    for name in os.listdir(folder):
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) in keep:
            continue
        total += visit(folder, name, st)
        if not stat.S_ISDIR(st.st_mode) or depth >= _DEEPEST:
            continue
        try:
            sub = os.open(name, _FOLDER, dir_fd=folder)
        except OSError as error:  # gone, or swapped for a link meanwhile
            if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EACCES):
                continue
            raise
        try:
            total += _walk(sub, depth + 1, keep, visit)
        finally:
            os.close(sub)
    return total


def _own(folder: int, name: str | None, user: tuple[int, int], st: os.stat_result | None = None
         ) -> int:  # fmt: skip
    if st is None:
        st = os.fstat(folder)
    if (st.st_uid, st.st_gid) == user:
        return 0
    if name is None:
        os.fchown(folder, *user)
    else:
        os.chown(name, *user, dir_fd=folder, follow_symlinks=False)
    return 1
