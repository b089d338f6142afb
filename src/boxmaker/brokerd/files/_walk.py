"""The race-free walk beneath a root, for the file tools (`file_tools.py`): every folder from the
root down to where a path leads is held open, and each step is taken relative to the one above
it, so a folder swapped for a link between a check and an open cannot redirect the open.

Strategy: no path string is ever built and opened. The root is opened by its path (trusted
config, free of links); each component below it with `O_PATH | O_NOFOLLOW | O_DIRECTORY`
relative to the folder above. A component that is a symbolic link is read (`readlink`) and its
target walked here, not by the kernel: a relative target from the link's folder, its `..`
popping the stack of folders (popping past the root is an escape), an absolute target an escape
outright; 40 links at most in all. The last component is opened with `O_NOFOLLOW | O_NONBLOCK`
(a FIFO cannot hang the open) and checked on its descriptor: a regular file or a folder, never a
device, FIFO or socket. Files are written under a hidden name in their folder, fsynced and
renamed over (`put_file`); bytes read are made text here too (`text_of`, `clean`). Blocking
calls; `Denied` and `Fixable` say what the tool answers.

The root is checked to be the folder it was granted as (its identity), and every folder the
walk enters against the roots inside it (`roots.Fence`): a closed one is never entered, one
that may not be written is never written, and the class of what was read rises to theirs.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import stat
from types import TracebackType

from ...proto import DataClass
from ..errors import Denied, Fixable
from .put import Owner, give, owner_in
from .roots import NO_FENCE, Fence, Identity, Located, Root, highest

__all__ = [
    "MAX_LINKS",
    "Denied",
    "Fixable",
    "Walk",
    "after_walk",
    "clean",
    "identity_of",
    "kind_of",
    "read_at_most",
    "text_of",
]

MAX_LINKS = 40  # as the kernel's own limit (MAXSYMLINKS)
_FOLDER = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_LAST = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SNIFF = 8192  # a NUL byte in this many first bytes: not text
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"PK\x05\x06", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"\x7fELF", "ELF executable"),
)
# C0, DEL and C1 controls, and the marks that reorder text on a terminal (bidi overrides).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(32), *range(127, 160))}
_CONTROLS |= {
    c: f"\\u{c:04x}"
    for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}
_KINDS = {
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFLNK: "symbolic link",
}


def identity_of(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)


def moved(root: Root) -> str:
    """Why a root that is no longer the folder it was granted as is refused."""
    return (
        f"{root.shown} is no longer the folder it was granted as (it was moved or replaced "
        "since brokerd started): nothing in it is reached until the owner puts it back or "
        "starts brokerd again"
    )


def after_walk(located: Located) -> None:
    """Called by the file tools between walking a path's folders and opening its last
    component: a seam for the tests that swap a folder for a link at that very moment (they
    replace it on this module). Does nothing."""


def kind_of(mode: int) -> str:
    """What a file other than a regular one or a folder is, in a word or two."""
    return _KINDS.get(stat.S_IFMT(mode), "special file")


class Walk:
    """The folders from `located`'s root down to where its path leads, each held open; a
    context manager that closes them all. `parents()` walks to the last component, then
    `open_last()` opens it; `folder()` is the folder reached, opened for reading and fsync.
    `fence` holds the roots inside this one; `writing`, that the tool writes what it reaches;
    `owner`, who the folders it makes belong to; `data_class` is the highest class of the
    roots the walk entered.

    Raises (when made):
        Denied: the root is no longer the folder it was granted as.
    """

    def __init__(
        self,
        located: Located,
        fence: Fence = NO_FENCE,
        *,
        writing: bool = False,
        owner: Owner = None,
    ) -> None:
        self._located = located
        self._shown = located.shown
        self._fence = fence
        self._writing = writing
        self._owner = owner  # of the folders it makes
        self.data_class: DataClass = located.root.data_class
        self._stack = [open_root(located.root)]
        self._opened: list[int] = []  # descriptors handed out, closed with the stack
        self._links = 0
        self._via = ""  # the last link followed, for the message of an escape

    def __enter__(self) -> Walk:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for fd in reversed(self._opened + self._stack):
            os.close(fd)
        self._opened, self._stack = [], []

    def parents(self, *, create: bool = False) -> str | None:
        """Walk the path's folders but the last component, which is returned (None: the path
        ends at the folder reached). With `create`, missing folders are made (0700).

        Raises:
            Denied: a link leads out of the root.
            Fixable: a folder is missing or is a file, or too many links.
        """
        return self._walk(self._located.parts, create=create)

    def open_last(self, name: str | None, *, files: bool, folders: bool) -> tuple[int, str | None]:
        """Open `name` in the folder reached (None: that folder), following links beneath the
        root; the descriptor (closed with the walk) and the name it was found under.

        Raises:
            Denied: a link leads out of the root, or it is a device, FIFO or socket.
            Fixable: it does not exist, is a file where a folder is needed or the reverse.
        """
        while True:
            try:
                fd = os.open("." if name is None else name, _LAST, dir_fd=self._stack[-1])
            except OSError as exc:
                if exc.errno == errno.ELOOP and name is not None:
                    name = self._walk(self._link(name), create=False)
                    continue
                if exc.errno == errno.ENXIO:  # a socket, or a device with nothing behind it
                    raise Denied(self._special(self._kind(name))) from None
                if exc.errno == errno.ENOENT:
                    raise Fixable(
                        f"{self._shown} does not exist: list_dir its folder to see what does."
                    ) from None
                raise
            self._opened.append(fd)
            st = os.fstat(fd)
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                self._enter(st)
            if stat.S_ISDIR(mode) and not folders:
                raise Fixable(f"{self._shown} is a folder, not a file: use list_dir on it.")
            if stat.S_ISREG(mode) and not files:
                raise Fixable(f"{self._shown} is a file, not a folder: use read_file on it.")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise Denied(self._special(kind_of(mode)))
            if stat.S_ISREG(mode) and st.st_nlink > 1 and st.st_dev in self._fence.linked:
                raise Denied(
                    f"{self._shown} has other names (hard links) on a disk that holds a root "
                    "closed to this one: the file tools do not read it"
                )
            return fd, name

    def folder(self) -> int:
        """The folder reached, opened for reading (listing, fsync); closed with the walk."""
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self._stack[-1])
        self._opened.append(fd)
        return fd

    def _walk(self, parts: tuple[str, ...] | list[str], *, create: bool) -> str | None:
        pending = [part for part in reversed(parts) if part not in ("", ".")]  # next on top
        while pending:
            part = pending.pop()
            if part == "..":
                self._up()
            elif not pending:
                return part
            else:
                fd = self._open_folder(part, create=create)
                if fd is None:  # a link (or a file): walk its target instead
                    pending.extend(reversed(self._link(part)))
                else:
                    self._stack.append(fd)
                    self._enter(os.fstat(fd))
        return None

    def _enter(self, st: os.stat_result) -> None:
        """The walk reaches the folder `st`: if it is a root inside this one, its rules."""
        other = self._fence.get(identity_of(st))
        if other is None:
            return
        if other.closed:
            raise Denied(
                f"{self._shown} leads into {other.shown}, which is closed: only a path that "
                "names it reaches it"
            )
        if self._writing and not other.write:
            raise Denied(f"{self._shown} leads into {other.shown}, which may not be written")
        self.data_class = highest(self.data_class, other.data_class)

    def _open_folder(self, part: str, *, create: bool) -> int | None:
        try:
            return os.open(part, _FOLDER, dir_fd=self._stack[-1])
        except FileNotFoundError:
            if not create:
                raise Fixable(
                    f"{self._shown}: there is no folder {part!r} on the way; list_dir its parent "
                    "to see what there is."
                ) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                return None
            raise
        try:
            os.mkdir(part, 0o700, dir_fd=self._stack[-1])
            if self._owner is not None:
                at = self._stack[-1]
                owner = owner_in(at, self._owner)
                give(lambda: os.chown(part, *owner, dir_fd=at, follow_symlinks=False))
        except FileExistsError:
            pass
        return self._open_folder(part, create=False)  # whatever is there now, walked as usual

    def _link(self, part: str) -> list[str]:
        """The components of the link `part`'s target, to walk from its folder."""
        try:
            target = os.readlink(part, dir_fd=self._stack[-1])
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise Fixable(f"{self._shown}: {part!r} is a file, not a folder.") from None
            raise
        self._links += 1
        if self._links > MAX_LINKS:
            raise Fixable(
                f"{self._shown}: too many links (more than {MAX_LINKS}) followed; a link leads "
                "round in a circle. Use another path."
            )
        self._via = f"{part!r} -> {target!r}"
        if target.startswith("/"):
            raise Denied(
                f"{self._shown} goes through a link to an absolute path ({self._via}), which "
                f"leads out of {self._where()}: use a path inside it."
            )
        return target.split("/")

    def _up(self) -> None:
        if len(self._stack) == 1:
            raise Denied(
                f"{self._shown} leads out of {self._where()} through a link ({self._via}): "
                "only paths inside it are reachable."
            )
        os.close(self._stack.pop())

    def _kind(self, name: str | None) -> str:
        try:
            return kind_of(
                os.stat(name or ".", dir_fd=self._stack[-1], follow_symlinks=False).st_mode
            )
        except OSError:
            return "socket or device"

    def _where(self) -> str:
        root = self._located.root
        return "the workspace" if root.name == "workspace" else f"the root {root.path}"

    def _special(self, kind: str) -> str:
        return f"{self._shown} is a {kind}: the file tools use regular files and folders only."


def open_root(root: Root) -> int:
    """`root`'s folder, opened by its path (links free when granted) and checked to be the
    folder it was granted as; closed by the caller.

    Raises:
        Denied: it is another folder now (moved, replaced, or a link put in its place).
        OSError: it cannot be opened (gone: `FileNotFoundError`).
    """
    try:
        fd = os.open(str(root.path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if root.identity is None:
            raise
        raise Denied(moved(root)) from None
    if root.identity is not None and identity_of(os.fstat(fd)) != root.identity:
        os.close(fd)
        raise Denied(moved(root))
    return fd


def read_at_most(fd: int, size: int) -> bytes:
    """Up to `size` bytes from `fd`, fewer only at its end."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def clean(name: str) -> str:
    """A name from the disk as text a model can read and a line cannot be forged with:
    bytes that are not UTF-8 as U+FFFD, control characters escaped."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace").translate(_CONTROLS)


def text_of(data: bytes, *, cut: bool, size: int, shown: str, tool: str) -> str:
    """`data` as UTF-8 text (`cut`: it may end inside a character), or `Fixable` saying what
    kind of binary file it is."""
    if b"\0" not in data[:_SNIFF]:
        with contextlib.suppress(UnicodeDecodeError):
            return codecs.getincrementaldecoder("utf-8")().decode(data, final=not cut)
    kind = next((kind for magic, kind in _MAGIC if data.startswith(magic)), "binary data")
    raise Fixable(f"{shown} is a binary file ({kind}, {size} bytes), not text: {tool} reads text.")
