"""What a `write_file` or `edit_file` call would change, shown to the owner who is asked for
it (SPEC section 21): a unified diff of the file as it is and as the call would leave it,
bounded with its head and tail. A blocking function, run in a worker thread; it reads the file
through the same race-free walk the tools use (`_walk.py`) and writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..checkpoints.manifest import diff_text
from ._walk import Denied, Fixable, Walk, read_at_most
from .limits import FileLimits
from .roots import WRITES, Fence, Located, Root, fence_of

__all__ = ["DIFF_LINES", "change_of"]

LIMITS = FileLimits()

DIFF_LINES = 120  # lines of a diff shown with a question, its middle left out past them


def change_of(
    tool: str,
    arguments: dict[str, Any],
    located: Located | None,
    roots: Sequence[Root],
    limits: FileLimits = LIMITS,
) -> str:
    """The change `tool` would make to the file at `located` (in one of `roots`), as a diff;
    "" for a tool that writes no file, or when it cannot be told (the file cannot be read,
    the edit would fail: the call says why when it runs)."""
    if tool not in WRITES or located is None:
        return ""
    fence = fence_of(located.root, roots)
    try:
        old = _current(located, fence, limits)
    except (Denied, Fixable, OSError):
        return ""
    if tool == "write_file":
        new = str(arguments["content"]).encode("utf-8", "surrogateescape")
    elif tool == "edit_file" and old is not None:
        try:
            text = old.decode("utf-8")
        except UnicodeDecodeError:
            return ""
        before, after = str(arguments["old"]), str(arguments["new"])
        if not before or before not in text:
            return ""
        every = bool(arguments.get("replace_all"))
        new = text.replace(before, after, -1 if every else 1).encode("utf-8", "surrogateescape")
    else:
        return ""
    if len(new) > limits.write_bytes:
        return ""
    return diff_text(old, new, located.shown, DIFF_LINES)


def _current(located: Located, fence: Fence, limits: FileLimits) -> bytes | None:
    """The file's bytes now (None: there is none), at most the most a tool writes."""
    with Walk(located, fence) as walk:
        try:
            name = walk.parents()
        except Fixable:  # a folder on the way is missing: write_file makes it, and the file
            return None
        if name is None:
            raise Fixable("a folder")
        try:
            os.stat(name, dir_fd=walk.folder(), follow_symlinks=False)
        except FileNotFoundError:
            return None
        fd, _name = walk.open_last(name, files=True, folders=False)
        data = read_at_most(fd, limits.write_bytes + 1)
    if len(data) > limits.write_bytes:
        raise Fixable("too big to show")
    return data
