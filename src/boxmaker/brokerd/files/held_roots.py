"""A root as it is on disk when the policy grants it: its folder, found by following the links
of its path one at a time (never a link inside the workspace, which the agent can make), and
what that folder is (its identity: device and inode). Every later walk and sandbox checks the
identity again (`_walk.open_root`, `sandbox.hold`): a root is the folder it was when granted.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import attrs

from ._walk import MAX_LINKS
from .roots import Identity, Root, inside

__all__ = ["identified", "identity_at", "resolve_folder"]


def resolve_folder(path: str, workspace: Path | None = None) -> Path:
    """A root's folder, links followed, one component at a time; never through a link inside
    `workspace` (the agent's own folder, where it can make links: a root it could point
    anywhere before brokerd starts is no grant of the owner's). ValueError saying why when
    there is none."""
    real = Path("/")
    pending = [part for part in reversed(PurePosixPath(path).parts) if part != "/"]
    links = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            real = real.parent
            continue
        step = real / part
        try:
            mode = os.lstat(step).st_mode
            if not stat.S_ISLNK(mode):
                real = step
                continue
            target = os.readlink(step)
        except OSError as exc:
            raise ValueError(exc.strerror or str(exc)) from exc
        if workspace is not None and inside(PurePosixPath(step), PurePosixPath(workspace)):
            raise ValueError(
                f"it goes through a link inside the workspace ({step} -> {target}), "
                "which the agent can change: name the folder itself"
            )
        links += 1
        if links > MAX_LINKS:
            raise ValueError("too many links: a link leads round in a circle")
        real = real if not target.startswith("/") else Path("/")
        pending += [part for part in reversed(PurePosixPath(target).parts) if part != "/"]
    if not real.is_dir():
        raise ValueError("not a folder")
    return real


def identified(roots: Sequence[Root]) -> tuple[Root, ...]:
    """`roots` with what each is now (its identity): the folder it is when granted, refused
    once it is another (`_walk.open_root`, `sandbox.hold`).

    Raises:
        OSError: one of them cannot be looked at.
    """
    return tuple(attrs.evolve(root, identity=identity_at(root.path)) for root in roots)


def identity_at(folder: PurePosixPath) -> Identity:
    """Raises OSError."""
    st = os.stat(folder)
    return (st.st_dev, st.st_ino)
