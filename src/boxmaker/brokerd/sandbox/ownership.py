"""Who owns what the agent makes, and what it may never leave behind.

The sandbox's user. Under root nothing runs as root: every process brokerd starts for a tool
or an MCP server becomes `[sandbox] user` first (`launch.py`). Its default is the account
`boxmaker-sandbox` where the machine has one, else uid and gid 65533 with no account: in the
range (65000 to 65533) that Debian's policy reserves and never gives an account, outside
systemd's dynamic users (61184 to 65519) and `nobody` (65534, shared by many daemons), and
within the 16 bits that every file system and user namespace maps. Should that default uid be
another account's, it is refused (the sandbox must not share one); a user the owner names in
the config is taken as named, but never root.

What it owns. Under root the workspace is the sandbox user's, 0700: `take_over` gives it every
entry of the workspace at brokerd's start (but those of a root inside it that is closed or may
not be written: the sandbox never writes them; and a file with other names, a hard link), and
the file tools give it what they make in the workspace (`owner` of `put_file`); a file they
replace keeps its owner.

What never survives: a set-uid or set-gid bit on a file of the sandbox's user in the workspace
(`sweep_setuid`, after every sandboxed call, which also makes the workspace 0700 again under
root; `put_file` drops them from what it writes). A set-uid file the sandbox made would run as
its user, outside the sandbox, for whoever can reach it.

Both walk the tree however deep it goes, holding one folder open at a time (`walk`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
from collections.abc import Callable, Collection, Sequence

from attrs import frozen

from ..files.put import give
from ..files.roots import Identity

__all__ = [
    "DEFAULT_ACCOUNT",
    "DEFAULT_UID",
    "Swept",
    "sandbox_user",
    "sweep_setuid",
    "take_over",
    "walk",
]

DEFAULT_ACCOUNT = "boxmaker-sandbox"
DEFAULT_UID = 65533
_SETID = stat.S_ISUID | stat.S_ISGID
_TOP = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FOLDER = _TOP | os.O_NOFOLLOW
_Visit = Callable[[int, str, os.stat_result, str], int]  # (folder, name, lstat, path) -> n


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
            return (
                f"uid {DEFAULT_UID}, the sandbox's by default, is the account {taken!r}: "
                "set [sandbox] user to an account of its own"
            )
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


def take_over(
    workspace: str, user: tuple[int, int], keep: Collection[Identity], tops: Sequence[str] = ()
) -> int:
    """Give `user` the workspace (made 0700) and every entry in it (links themselves, never
    what they lead to; never a file with other names elsewhere, a hard link), but the folders
    of `keep` and what is in them, save the folders of `tops` inside those (writable roots,
    each given over the same way); how many entries changed owner.

    Raises:
        OSError: the workspace cannot be opened, or changed under the walk too often.
    """

    def own(folder: int, name: str, st: os.stat_result, _path: str) -> int:
        if (st.st_uid, st.st_gid) == user or (not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1):
            return 0
        give(lambda: os.chown(name, *user, dir_fd=folder, follow_symlinks=False))
        return 1

    changed = 0
    for top in (workspace, *tops):
        fd = os.open(top, _TOP)
        try:
            st = os.fstat(fd)
            if (st.st_uid, st.st_gid) != user:
                give(lambda: os.fchown(fd, *user))  # noqa: B023 (called at once)
                changed += 1
            if top == workspace and stat.S_IMODE(st.st_mode) != 0o700:
                os.fchmod(fd, 0o700)  # its user's alone: nothing in it is another's to reach
        finally:
            os.close(fd)
        changed += walk(top, keep, own)
    return changed


def sweep_setuid(
    workspace: str,
    owner: int,
    keep: Collection[Identity] = (),
    tops: Sequence[str] = (),
    private: bool = True,
) -> Swept:
    """Clear every set-uid and set-gid bit on the files of the workspace that `owner` (the
    sandbox's user) owns (a folder's set-gid only shares its group, and stays), skipping the
    folders of `keep` but the folders of `tops` inside them. With `private`, the workspace is
    made 0700 again first (a run may have opened it to others). A file that changed under the
    sweep, or could not be changed, is passed by and said (`Swept.missed`).

    Raises:
        OSError: the workspace cannot be opened, or changed under the walk too often.
    """
    swept = Swept([], [])

    def clear(folder: int, name: str, st: os.stat_result, path: str) -> int:
        if stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode) or not st.st_mode & _SETID:
            return 0
        if st.st_uid != owner:  # not the sandbox's: nor could a run have set it
            return 0
        try:
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:  # gone meanwhile
            return 0
        try:  # through the descriptor: the very file that was looked at, as it is now
            now = os.fstat(fd)
            if _identity(now) == _identity(st) and stat.S_ISREG(now.st_mode):
                os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(now.st_mode) & ~_SETID)
                swept.cleared.append(path)
            else:
                swept.missed.append(path)  # swapped under the sweep: the next one looks again
        except OSError:
            swept.missed.append(path)
        finally:
            os.close(fd)
        return 1

    if private:
        fd = os.open(workspace, _TOP)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o700:
                os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
    for top in (workspace, *tops):
        walk(top, keep, clear)
    return swept


@frozen
class Swept:
    """What a sweep cleared, and the set-uid files it met but could not clear."""

    cleared: list[str]
    missed: list[str]


class _Moved(Exception):
    """A folder of the walk is not where the walk left it."""


def walk(top: str, keep: Collection[Identity], visit: _Visit, tries: int = 3) -> int:
    """Call `visit(folder, name, lstat, path)` for every entry beneath `top` (`path` from
    `top`; a folder's entries
    before what is inside it), never through a link nor into a folder of `keep`; the sum of
    what it returned. However deep the tree, one folder is held open at a time: the walk
    climbs back through `..`, checking each folder is the one it left (device and inode), and
    starts again when one moved (at most `tries` times). An entry that cannot be looked at
    (gone meanwhile) is passed by; a folder its owner made unreadable is made readable to its
    owner when brokerd is that owner.

    Raises:
        OSError: `top` cannot be opened, or the tree kept changing under the walk.
    """
    for _try in range(tries):
        try:
            return _walk_once(top, keep, visit)
        except _Moved:
            continue
    raise OSError(errno.EAGAIN, f"{top} kept changing while it was walked")


def _walk_once(top: str, keep: Collection[Identity], visit: _Visit) -> int:
    current = os.open(top, _TOP)
    try:
        st = os.fstat(current)
        levels = [((st.st_dev, st.st_ino), iter(sorted(os.listdir(current))))]
        trail: list[str] = []  # the names of the folders walked down from `top`
        total = 0
        while levels:
            name = next(levels[-1][1], None)
            if name is None:  # this folder is done: back to the one above
                levels.pop()
                if not levels:
                    break
                trail.pop()
                above = os.open("..", _TOP, dir_fd=current)
                os.close(current)
                current = above
                if _identity(os.fstat(current)) != levels[-1][0]:
                    raise _Moved
                continue
            try:
                st = os.stat(name, dir_fd=current, follow_symlinks=False)
            except FileNotFoundError:
                continue
            folder = stat.S_ISDIR(st.st_mode)
            if folder and _identity(st) in keep:
                continue
            with contextlib.suppress(FileNotFoundError):
                total += visit(current, name, st, "/".join([*trail, name]))
            if not folder:
                continue
            below = _open_below(current, name, st)
            if below is None:
                continue
            try:
                entries = iter(sorted(os.listdir(below)))
            except OSError:
                os.close(below)
                continue
            os.close(current)
            current = below
            levels.append((_identity(st), entries))
            trail.append(name)
        return total
    finally:
        os.close(current)


def _open_below(folder: int, name: str, st: os.stat_result) -> int | None:
    """The folder `name` in `folder`, if it is still the one `st` saw (None: gone, a link
    now, or unreadable to brokerd)."""
    for _try in range(2):
        try:
            below = os.open(name, _FOLDER, dir_fd=folder)
        except PermissionError:
            if st.st_uid != os.geteuid():
                return None
            with contextlib.suppress(OSError):  # brokerd's own folder, made unreadable
                os.chmod(
                    name, stat.S_IMODE(st.st_mode) | 0o500, dir_fd=folder, follow_symlinks=False
                )
            continue
        except OSError:  # gone, or swapped for a link meanwhile
            return None
        if _identity(os.fstat(below)) == _identity(st):
            return below
        os.close(below)
        return None
    return None


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)
