"""`tree_of(path)`: a whole tree on disk as a value (each path's kind, bytes or link target,
mode and owner), read without following a link, to compare a root before and after."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["Node", "tree_of"]

Node = dict[str, object]  # {"kind", "mode", "uid", "gid"} and "bytes" (files), "target" (links)


def tree_of(path: Path) -> dict[str, Node]:
    """Everything beneath `path` (not `path` itself), by relative POSIX path: kind ("file",
    "dir", "link", "other"), mode (octal text, as `oct(stat.S_IMODE)`), uid, gid, a file's
    bytes, a link's target. Links are recorded, never followed."""
    found: dict[str, Node] = {}
    pending = [""]
    while pending:
        base = pending.pop()
        folder = path / base if base else path
        for name in sorted(os.listdir(folder)):
            rel = f"{base}/{name}" if base else name
            st = os.lstat(folder / name)
            node: Node = {"mode": oct(stat.S_IMODE(st.st_mode)), "uid": st.st_uid, "gid": st.st_gid}
            if stat.S_ISDIR(st.st_mode):
                node["kind"] = "dir"
                pending.append(rel)
            elif stat.S_ISREG(st.st_mode):
                node["kind"] = "file"
                node["bytes"] = (folder / name).read_bytes()
            elif stat.S_ISLNK(st.st_mode):
                node["kind"] = "link"
                node["target"] = os.readlink(folder / name)
                del node["mode"]  # a link's mode is always 0o777 and cannot be changed
            else:
                node["kind"] = "other"
            found[rel] = node
    return dict(sorted(found.items()))
