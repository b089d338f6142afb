"""Where a file tool may reach: the workspace and the roots the policy grants, and which of
them a path the model wrote lands in. Pure: nothing here touches the disk (the files are
opened race-free by `files.py`, beneath the root this chose).

A path is relative to the workspace, or absolute inside a root. It is taken apart into its
components here, once: empty and `.` components dropped, `..` refused outright (the model has
no reason to climb, and a climb is the first thing an escape tries), NUL refused. Of the roots
that hold a path (a relative one taken in the workspace), the deepest wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from attrs import frozen

from ..proto import DataClass

__all__ = ["FILE_TOOLS", "READS", "WRITES", "Located", "Root", "locate"]

READS = ("read_file", "list_dir", "search_files")  # the file tools that read a root
WRITES = ("write_file", "edit_file")  # and those that write it
FILE_TOOLS = READS + WRITES


@frozen
class Root:
    """A folder the file tools may reach: `path` absolute and free of links (resolved when
    the policy loads), what may be done in it, and how sensitive what it holds is."""

    name: str  # "workspace", or the policy's name for it
    path: PurePosixPath
    read: bool
    write: bool
    data_class: DataClass


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
