"""What a sandbox shows of the host besides the system: the folders bound into it, and the
roots inside them kept to their rules. Pure: `sandbox/bwrap.py` holds each folder (opened and
checked to be what it was) and `launch.py` writes the command line.

A run is shown its folders (`Shown`): the workspace read-write at `/workspace`, and for an MCP
server, folders read-only at their own paths. A root the policy grants inside one of them is
kept to its rules there too, whoever reads it: a closed one (`read = false`, or `secret`) is
masked (an empty read-only folder over it), one that may not be written is bound read-only,
and a writable one inside a read-only one is bound read-write. Every folder on the way down to
such a root is bound onto itself ("pinned"): a mount point cannot be renamed, so nothing the
sandbox runs can move a root or a folder above it, and each run finds them where the last one
left them. Each folder is bound by what it is (its identity), taken on the way down without
following a link (`sandbox.hold`): a root that is no longer there refuses the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import PurePosixPath

from attrs import frozen

from ..files.roots import Identity, Root, inside

__all__ = ["Access", "Mount", "Shown", "plan"]


class Access(Enum):
    """How a folder is bound."""

    WRITE = "rw"
    READ = "ro"
    MASK = "mask"  # masked: an empty read-only folder is all the sandbox sees


@frozen
class Shown:
    """A folder a run is shown: `dest` is where (an absolute path inside)."""

    path: PurePosixPath  # on the host, absolute
    dest: str
    access: Access
    identity: Identity | None = None  # what it must be (None: whatever is there when held)
    name: str = ""  # for a message: "the workspace", "the root notes (/home/me/notes)"


@frozen
class Mount:
    """One bind of a run, in the order bwrap makes them: `top` names the shown folder it is
    in (its index), `parts` the components below it (empty: the shown folder itself)."""

    top: int
    parts: tuple[str, ...]
    dest: str
    access: Access
    identity: Identity | None
    name: str


def _access(root: Root) -> Access:
    if root.closed:
        return Access.MASK
    return Access.WRITE if root.write else Access.READ


def plan(shown: Sequence[Shown], roots: Sequence[Root]) -> list[Mount]:
    """Every bind of a run shown `shown`, given every root the policy grants (the workspace's
    own entry among them is left alone: it is shown as itself): each shown folder, then, for
    each root inside one whose access is not the one it would have there, the folders on the
    way down pinned, and the root bound as its rules say. Parents come before children."""
    mounts: list[Mount] = []
    for top, folder in enumerate(shown):
        mounts.append(Mount(top, (), folder.dest, folder.access, folder.identity, folder.name))
        inner = sorted(
            (root for root in roots if inside(root.path, folder.path)),
            key=lambda root: len(root.path.parts),
        )
        done: dict[tuple[str, ...], Access] = {(): folder.access}
        for root in inner:
            parts = root.path.relative_to(folder.path).parts
            above = _enclosing(done, parts)
            if above is Access.MASK:
                continue  # inside a masked root: nothing of it is seen
            access = _access(root)
            if access is above:
                continue  # it is what it would be anyway: nothing to hold
            for depth in range(1, len(parts)):
                way = parts[:depth]
                if way not in done:
                    done[way] = _enclosing(done, way)
                    mounts.append(Mount(top, way, _dest(folder, way), done[way], None, root.shown))
            done[parts] = access
            mounts.append(
                Mount(top, parts, _dest(folder, parts), access, root.identity, root.shown)
            )
    return mounts


def _enclosing(done: dict[tuple[str, ...], Access], parts: tuple[str, ...]) -> Access:
    """The access of the deepest mount above `parts` (the shown folder's at least)."""
    for depth in range(len(parts) - 1, -1, -1):
        if parts[:depth] in done:
            return done[parts[:depth]]
    raise AssertionError("the shown folder itself is always mounted")


def _dest(folder: Shown, parts: tuple[str, ...]) -> str:
    return str(PurePosixPath(folder.dest).joinpath(*parts))
