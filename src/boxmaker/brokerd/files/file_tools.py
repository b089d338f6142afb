"""The five file tools of brokerd: `read_file`, `list_dir`, `search_files`, `write_file` and
`edit_file`, as blocking functions that brokerd runs in a worker thread.

Rules: a path reaches only beneath its root, race-free against links (`_walk.py`: each step is
taken relative to a folder held open, links are resolved here and never lead out, devices,
FIFOs and sockets are refused, the roots inside a root are kept to their own rules); everything
is bounded (`FileLimits`: bytes read and written, entries listed; `search.py` bounds a
search); a file is written whole or not at all. What a file holds is `untrusted`; what brokerd
says of a write is its own. A problem the model can fix is a
`FailedResponse` saying what to do next; a path out of bounds is a `DeniedResponse`.
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Iterator
from typing import Any

from ...proto import DataClass, DeniedResponse, FailedResponse, ResultResponse, ToolResponse
from . import _walk
from ._walk import Denied, Fixable, Walk, clean, kind_of, read_at_most, text_of
from .limits import FileLimits
from .put import Owner, put_file
from .roots import NO_FENCE, Fence, Located
from .search import search_files

__all__ = ["FileLimits", "run_file_tool"]

LIMITS = FileLimits()


def run_file_tool(
    tool: str,
    arguments: dict[str, Any],
    located: Located,
    limits: FileLimits = LIMITS,
    fence: Fence = NO_FENCE,
    owner: Owner = None,
) -> ToolResponse:
    """Run the file tool `tool` on `located` (the root and the components of its `path`
    argument; for `search_files` without one, the root itself) with `arguments` already
    checked against the tool's schema. The root's grant is the caller's to check; `fence`
    holds the roots inside it (`roots.fence_of`), which the walk keeps to their rules;
    `owner` is who what a write makes belongs to (under root: the sandbox's user in the
    workspace, the folder's owner elsewhere; None: brokerd's), while a file it replaces keeps
    its owner.

    Never raises for what the disk or the model can cause: an `OSError` is a
    `FailedResponse` naming the path. Raises `ValueError` for a tool not in `FILE_TOOLS`.
    """
    try:
        match tool:
            case "read_file":
                offset, limit = arguments.get("offset", 1), arguments.get("limit")
                return _read_file(located, fence, offset, limit or limits.read_lines, limits)
            case "list_dir":
                return _list_dir(located, fence, limits)
            case "search_files":
                return search_files(located, fence, arguments["pattern"], limits)
            case "write_file":
                return _write_file(located, fence, owner, arguments["content"], limits)
            case "edit_file":
                old, new, every = arguments["old"], arguments["new"], arguments.get("replace_all")
                return _edit_file(located, fence, old, new, bool(every), limits)
        raise ValueError(f"{tool!r} is not a file tool")
    except Denied as exc:
        return DeniedResponse(str(exc))
    except Fixable as exc:
        return FailedResponse(str(exc))
    except OSError as exc:
        return FailedResponse(f"{located.shown}: {exc.strerror or exc}.")


def _result(data_class: DataClass, text: str, *, untrusted: bool = True) -> ResultResponse:
    return ResultResponse(text, data_class, untrusted=untrusted, truncated=False)


def _read_file(
    located: Located, fence: Fence, offset: int, limit: int, limits: FileLimits
) -> ToolResponse:
    shown = located.shown
    with Walk(located, fence) as walk:
        name = walk.parents()
        _walk.after_walk(located)
        fd, _ = walk.open_last(name, files=True, folders=False)
        size = os.fstat(fd).st_size
        data = read_at_most(fd, limits.read_bytes + 1)
    cut = len(data) > limits.read_bytes
    text = text_of(data[: limits.read_bytes], cut=cut, size=size, shown=shown, tool="read_file")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    total = len(lines) if text else 0
    if total == 0:
        return _result(walk.data_class, f"{shown} is empty.")
    if offset > total:
        holds = f"the first {limits.read_bytes} bytes of {shown} hold" if cut else f"{shown} has"
        raise Fixable(f"{holds} {total} lines: offset {offset} is past the end.")
    end = min(total, offset - 1 + limit)
    shown_lines = [f"{n:>6}\t{lines[n - 1]}" for n in range(offset, end + 1)]
    if end < total:
        before = f" before the cut at {limits.read_bytes} bytes" if cut else ""
        shown_lines.append(f"... {total - end} more lines{before}: read_file with offset {end + 1}")
    elif cut:
        shown_lines.append(
            f"... cut at {limits.read_bytes} of {size} bytes: read_file reads no further into "
            "a file; search_files can find a line."
        )
    return _result(walk.data_class, "\n".join(shown_lines))


def _list_dir(located: Located, fence: Fence, limits: FileLimits) -> ToolResponse:
    total = 0

    def names(entries: Iterator[os.DirEntry[str]]) -> Iterator[str]:
        nonlocal total
        for entry in entries:
            total += 1
            yield entry.name

    with Walk(located, fence) as walk:
        name = walk.parents()
        _walk.after_walk(located)
        fd, _ = walk.open_last(name, files=False, folders=True)
        with os.scandir(fd) as entries:
            first = heapq.nsmallest(limits.list_entries, names(entries))
        lines = [line for entry in first if (line := _entry(fd, entry)) is not None]
    if total == 0:
        return _result(walk.data_class, f"{located.shown} is an empty folder.")
    if total > len(first):
        lines.append(f"... and {total - len(first)} more")
    return _result(walk.data_class, "\n".join(lines))


def _entry(folder: int, name: str) -> str | None:
    """One line of a listing (None: the entry went away meanwhile)."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            return f"{clean(name)} -> {clean(os.readlink(name, dir_fd=folder))}"
    except FileNotFoundError:
        return None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return f"{clean(name)}/"
    if stat.S_ISREG(mode):
        return f"{clean(name)}  {st.st_size} bytes"
    return f"{clean(name)}  ({kind_of(mode)})"


def _write_file(
    located: Located, fence: Fence, owner: Owner, content: str, limits: FileLimits
) -> ToolResponse:
    data = _encoded(content, "content", limits)
    with Walk(located, fence, writing=True, owner=owner) as walk:
        name = walk.parents(create=True)
        _walk.after_walk(located)
        if name is None:
            raise Fixable(f"{located.shown} is a folder: give the path of a file in it.")
        folder = walk.folder()
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        mode = st.st_mode if st is not None else None
        if mode is not None and stat.S_ISDIR(mode):
            raise Fixable(f"{located.shown} is a folder: give the path of a file in it.")
        if mode is not None and stat.S_ISLNK(mode):
            raise Fixable(
                f"{located.shown} is a symbolic link, which write_file does not replace: "
                "write to the file it leads to (list_dir shows it)."
            )
        if mode is not None and not stat.S_ISREG(mode):
            raise Denied(f"{located.shown} is a {kind_of(mode)}: write_file replaces files only.")
        if st is not None:
            owner = _keeps(st)
        put_file(folder, name, data, None if mode is None else stat.S_IMODE(mode), owner)
    how = "new file" if mode is None else "replaced"
    said = f"Wrote {len(data)} bytes to {located.shown} ({how})."
    return _result(walk.data_class, said, untrusted=False)


def _edit_file(
    located: Located, fence: Fence, old: str, new: str, replace_all: bool, limits: FileLimits
) -> ToolResponse:
    shown = located.shown
    if not old:
        raise Fixable(f"old is empty: give the exact text of {shown} to replace.")
    with Walk(located, fence, writing=True) as walk:
        name = walk.parents()
        _walk.after_walk(located)
        fd, name = walk.open_last(name, files=True, folders=False)
        st = os.fstat(fd)
        data = read_at_most(fd, limits.write_bytes + 1)
        if len(data) > limits.write_bytes:
            raise Fixable(
                f"{shown} is over {limits.write_bytes} bytes, more than edit_file writes: "
                "edit a smaller file."
            )
        text = text_of(data, cut=False, size=st.st_size, shown=shown, tool="edit_file")
        count = text.count(old)
        if count == 0:
            raise Fixable(
                f"old was not found in {shown}: read_file it and copy the text exactly, spaces "
                "and line ends included."
            )
        if count > 1 and not replace_all:
            raise Fixable(
                f"old found {count} times in {shown}: give more context to make it unique, "
                "or set replace_all."
            )
        done = count if replace_all else 1
        grows = len(new.encode(errors="replace")) - len(old.encode(errors="replace"))
        if (size := len(data) + done * grows) > limits.write_bytes:  # before the text is built
            raise Fixable(
                f"the result is {size} bytes, over the {limits.write_bytes} bytes a file tool "
                "writes: write less."
            )
        changed = _encoded(text.replace(old, new, -1 if replace_all else 1), "the result", limits)
        assert name is not None  # a regular file was opened, so by its name
        put_file(walk.folder(), name, changed, stat.S_IMODE(st.st_mode), _keeps(st))
    done = count if replace_all else 1
    plural = "occurrence" if done == 1 else "occurrences"
    return _result(walk.data_class, f"Replaced {done} {plural} in {shown}.", untrusted=False)


def _keeps(st: os.stat_result) -> tuple[int, int] | None:
    """The owner a replaced file keeps: its own (only root can give it; else it is brokerd's
    user's, as it was)."""
    return (st.st_uid, st.st_gid) if os.geteuid() == 0 else None


def _encoded(text: str, what: str, limits: FileLimits) -> bytes:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise Fixable(f"{what} holds a lone surrogate, which is not text: remove it.") from None
    if len(data) > limits.write_bytes:
        raise Fixable(
            f"{what} is {len(data)} bytes, over the {limits.write_bytes} bytes a file tool "
            "writes: write less."
        )
    return data
