"""Where a file tool may reach: the workspace and the roots the policy grants, and which of
them a path the model wrote lands in. Pure: nothing here touches the disk (the files are
opened race-free by `files/file_tools.py`, beneath the root this chose).

A path is relative to the workspace, or absolute inside a root. It is taken apart into its
components here, once: empty and `.` components dropped, `..` refused outright (the model has
no reason to climb, and a climb is the first thing an escape tries), NUL refused. Of the roots
that hold a path (a relative one taken in the workspace), the deepest wins.

A root is the folder it was when it was granted: its `identity` (device and inode) is taken
when the policy loads, and every walk, and every sandbox that shows it, checks it again
(`_walk.py`, `mounts.py`). A root inside another is fenced off from the walks of the outer
one (`Fence`): a closed root (`read = false`, or `secret`) is never entered by them, however
they get there (a link, a search); a root that may not be written is never written through
them; and what they read of an open one raises their result's class to its class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from attrs import field, frozen

from ...proto import DataClass

__all__ = [
    "FILE_TOOLS",
    "NO_FENCE",
    "READS",
    "WRITES",
    "Fence",
    "Identity",
    "Located",
    "Root",
    "Written",
    "closed_over",
    "fence_of",
    "highest",
    "inside",
    "locate",
    "shown_class",
    "written",
]

READS = ("read_file", "list_dir", "search_files")  # the file tools that read a root
WRITES = ("write_file", "edit_file")  # and those that write it
FILE_TOOLS = READS + WRITES

Identity = tuple[int, int]  # a folder's (st_dev, st_ino): what it is, wherever it is
_ORDER = (DataClass.PUBLIC, DataClass.PRIVATE, DataClass.SECRET)


def highest(*classes: DataClass) -> DataClass:
    """The most sensitive of `classes` (public without any)."""
    return max(classes, key=_ORDER.index, default=DataClass.PUBLIC)


@frozen
class Root:
    """A folder the file tools may reach: `path` absolute and free of links (resolved when
    the policy loads), what may be done in it, how sensitive what it holds is, and what it is
    (`identity`, None only where no disk is involved: a test's, a policy's example)."""

    name: str  # "workspace", or the policy's name for it
    path: PurePosixPath
    read: bool
    write: bool
    data_class: DataClass
    identity: Identity | None = field(default=None, eq=False)

    @property
    def closed(self) -> bool:
        """Closed to every tool that does not name it by its path: nothing may be read of it
        from another root (a walk, a link, the sandbox)."""
        return not self.read or self.data_class is DataClass.SECRET

    @property
    def shown(self) -> str:
        return (
            "the workspace" if self.name == "workspace" else f"the root {self.name} ({self.path})"
        )


def inside(path: PurePosixPath, folder: PurePosixPath) -> bool:
    """Whether `path` is strictly beneath `folder` (both absolute and free of links)."""
    return path != folder and path.is_relative_to(folder)


@frozen
class Fence:
    """The roots inside a walk's root, by identity: what its walk must not enter (closed),
    must not write (read-only), or reads at a higher class; and the devices (`linked`) where
    a file with other names (a hard link) could be a file of a root the walk must not read so
    (closed, or of a higher class: a link made before its folder was one). Empty: nothing is
    fenced."""

    inner: Mapping[Identity, Root] = field(factory=dict)
    linked: frozenset[int] = frozenset()

    def get(self, identity: Identity) -> Root | None:
        return self.inner.get(identity)


NO_FENCE = Fence()


def fence_of(root: Root, roots: Sequence[Root]) -> Fence:
    """The fence of a walk beneath `root`: every other root inside it (`roots` holds the
    workspace and the policy's roots; one without an identity cannot be met by a walk)."""
    nested = [other for other in roots if inside(other.path, root.path)]

    def above(other: Root) -> bool:  # closed, or of a higher class than the walk's root
        return other.closed or highest(other.data_class, root.data_class) != root.data_class

    higher = [o for o in roots if o.path != root.path and o.identity is not None and above(o)]
    return Fence(
        {other.identity: other for other in nested if other.identity is not None},
        frozenset(other.identity[0] for other in higher if other.identity is not None),
    )


def shown_class(roots: Sequence[Root], read: Sequence[PurePosixPath] = ()) -> DataClass:
    """The class of what the sandbox shows of `roots` (the workspace first), and of the
    folders `read` (an MCP server's): the workspace's, raised by every open root inside it or
    one of them (a closed one is masked there), and by every root that holds one of them."""
    workspace = roots[0]
    folders = [workspace.path, *read]
    shown = [r for r in roots[1:] if not r.closed and any(inside(r.path, f) for f in folders)]
    holding = [r for r in roots if any(f == r.path or inside(f, r.path) for f in read)]
    return highest(workspace.data_class, *(root.data_class for root in (*shown, *holding)))


def closed_over(roots: Sequence[Root], folder: PurePosixPath) -> Root | None:
    """The closed root `folder` is, or lies in, if any: no run may be shown it."""
    return next(
        (r for r in roots if r.closed and (folder == r.path or inside(folder, r.path))), None
    )


@frozen
class Written:
    """What the sandbox may write of the workspace (`roots[0]`): the workspace, less the
    roots inside it it never writes (`keep`: closed, or read-only), save the writable roots
    inside a read-only one (`tops`, bound read-write there: `mounts.plan`)."""

    keep: list[Identity]
    tops: list[PurePosixPath]


def written(roots: Sequence[Root]) -> Written:
    workspace = roots[0]
    inner = [root for root in roots[1:] if inside(root.path, workspace.path)]
    kept = [root for root in inner if root.closed or not root.write]
    tops = [
        root.path
        for root in inner
        if root.write
        and not root.closed
        and any(inside(root.path, above.path) for above in kept)
        and not any(inside(root.path, above.path) for above in kept if above.closed)
    ]
    return Written([root.identity for root in kept if root.identity is not None], tops)


@frozen
class Located:
    """A path inside a root: the components below the root (empty: the root itself)."""

    root: Root
    parts: tuple[str, ...]

    @property
    def shown(self) -> str:
        """The path as the model should write it again."""
        inside = "/".join(self.parts)
        if self.root.name == "workspace":
            return inside or "."
        return str(self.root.path / inside) if inside else str(self.root.path)


def locate(path: str, workspace: Root, roots: Sequence[Root]) -> Located | str:
    """The root and components `path` names, or the sentence saying why it names none."""
    if "\0" in path:
        return f"{path!r} holds a NUL character"
    pure = PurePosixPath(path)
    parts = [part for part in pure.parts if part not in ("", ".")]
    if ".." in parts:
        return f"{path!r} holds '..': write the path without it"
    # A relative path is taken in the workspace, where a root inside it still decides.
    parts = parts[1:] if pure.is_absolute() else [*workspace.path.parts[1:], *parts]
    best: Root | None = None
    for root in (workspace, *roots):
        depth = len(root.path.parts) - 1
        if tuple(parts[:depth]) == root.path.parts[1:] and (
            best is None or depth > len(best.path.parts) - 1
        ):
            best = root
    if best is None:
        return (
            f"{path} is outside the workspace ({workspace.path}) and every root the policy grants"
        )
    return Located(best, tuple(parts[len(best.path.parts) - 1 :]))
