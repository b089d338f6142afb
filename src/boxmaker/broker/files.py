"""The five file tools of brokerd: `read_file`, `list_dir`, `search_files`, `write_file` and
`edit_file`, as blocking functions that brokerd runs in a worker thread.

Rules: a path reaches only beneath its root, race-free against links (`_walk.py`: each step is
taken relative to a folder held open, links are resolved here and never lead out, devices,
FIFOs and sockets are refused); everything is bounded (`FileLimits`: bytes read and written,
entries listed, files searched, lines returned, and the time a search may take, regular
expressions included); a file is written whole or not at all. What a file holds is
`untrusted`; what brokerd says of a write is its own. A problem the model can fix is a
`FailedResponse` saying what to do next; a path out of bounds is a `DeniedResponse`.
"""

from __future__ import annotations

import heapq
import os
import stat
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import regex
from attrs import define, field, frozen

from ..proto import DeniedResponse, FailedResponse, ResultResponse, ToolResponse
from ._walk import Denied, Failed, Walk, clean, kind_of, put_file, read_at_most, text_of
from .roots import Located

__all__ = ["FileLimits", "run_file_tool"]


_SHOWN_LINE = 200  # characters of a matching line search_files shows
_DEEPEST = 64  # folders below the searched one that search_files enters


@frozen
class FileLimits:
    """How much a file tool may read, write, list and search."""

    read_bytes: int = 1024 * 1024  # most bytes read_file reads from a file
    read_lines: int = 2000  # default `limit` of read_file
    write_bytes: int = 8 * 1024 * 1024  # most bytes write_file/edit_file write
    list_entries: int = 1000  # most entries list_dir returns (then "... and N more")
    search_files: int = 2000  # most files search_files opens
    search_file_bytes: int = 1024 * 1024  # files larger are skipped by search_files
    search_lines: int = 200  # most matching lines returned
    search_seconds: float = 5.0  # whole search budget (regex `timeout=` per call from what is left)
    # Bounded before compiling: `regex` expands `{m,n}` then (`(?:a{65535}){65535}`: gigabytes).
    pattern_chars: int = 1000
    pattern_repeat: int = 1000


def _after_walk(located: Located) -> None:
    """Called between walking a path's folders and opening its last component: a seam for the
    tests that swap a folder for a link at that very moment. Does nothing."""


def run_file_tool(
    tool: str,
    arguments: dict[str, Any],
    located: Located,
    limits: FileLimits = FileLimits(),
) -> ToolResponse:
    """Run the file tool `tool` on `located` (the root and the components of its `path`
    argument; for `search_files` without one, the root itself) with `arguments` already
    checked against the tool's schema. The root's grant is the caller's to check.

    Never raises for what the disk or the model can cause: an `OSError` is a
    `FailedResponse` naming the path. Raises `ValueError` for a tool not in `FILE_TOOLS`.
    """
    try:
        match tool:
            case "read_file":
                offset, limit = arguments.get("offset", 1), arguments.get("limit")
                return _read_file(located, offset, limit or limits.read_lines, limits)
            case "list_dir":
                return _list_dir(located, limits)
            case "search_files":
                return _search_files(located, arguments["pattern"], limits)
            case "write_file":
                return _write_file(located, arguments["content"], limits)
            case "edit_file":
                old, new = arguments["old"], arguments["new"]
                return _edit_file(located, old, new, arguments.get("replace_all", False), limits)
        raise ValueError(f"{tool!r} is not a file tool")
    except Denied as exc:
        return DeniedResponse(str(exc))
    except Failed as exc:
        return FailedResponse(str(exc))
    except OSError as exc:
        return FailedResponse(f"{located.shown}: {exc.strerror or exc}.")


def _result(located: Located, text: str, *, untrusted: bool = True) -> ResultResponse:
    return ResultResponse(text, located.root.data_class, untrusted=untrusted, truncated=False)


def _read_file(located: Located, offset: int, limit: int, limits: FileLimits) -> ToolResponse:
    shown = located.shown
    with Walk(located) as walk:
        name = walk.parents()
        _after_walk(located)
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
        return _result(located, f"{shown} is empty.")
    if offset > total:
        holds = f"the first {limits.read_bytes} bytes of {shown} hold" if cut else f"{shown} has"
        raise Failed(f"{holds} {total} lines: offset {offset} is past the end.")
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
    return _result(located, "\n".join(shown_lines))


def _list_dir(located: Located, limits: FileLimits) -> ToolResponse:
    total = 0

    def names(entries: Iterator[os.DirEntry[str]]) -> Iterator[str]:
        nonlocal total
        for entry in entries:
            total += 1
            yield entry.name

    with Walk(located) as walk:
        name = walk.parents()
        _after_walk(located)
        fd, _ = walk.open_last(name, files=False, folders=True)
        with os.scandir(fd) as entries:
            first = heapq.nsmallest(limits.list_entries, names(entries))
        lines = [line for entry in first if (line := _entry(fd, entry)) is not None]
    if total == 0:
        return _result(located, f"{located.shown} is an empty folder.")
    if total > len(first):
        lines.append(f"... and {total - len(first)} more")
    return _result(located, "\n".join(lines))


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


class _Stop(Exception):
    """A bound of search_files was reached; `str()` is the last line of the answer."""


@define
class _Search:
    pattern: regex.Pattern[str]
    limits: FileLimits
    deadline: float
    lines: list[str] = field(factory=list)
    files: int = 0
    skipped: Counter[str] = field(factory=Counter)
    timed_out: bool = False

    def folder(self, fd: int, prefix: str, depth: int) -> None:
        for name in sorted(os.listdir(fd)):
            self._time_left(prefix + name)
            try:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:  # gone meanwhile
                continue
            if stat.S_ISDIR(mode) and depth < _DEEPEST:
                self._enter(fd, name, prefix, depth)
            elif stat.S_ISDIR(mode):
                self.skipped[f"folders deeper than {_DEEPEST}"] += 1
            elif stat.S_ISREG(mode):
                self._open(fd, name, prefix + clean(name))
            # links are not followed; FIFOs, sockets and devices are never opened

    def _enter(self, fd: int, name: str, prefix: str, depth: int) -> None:
        try:
            sub = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
        except OSError:  # unreadable, or swapped for a link meanwhile
            self.skipped["unreadable"] += 1
            return
        try:
            self.folder(sub, f"{prefix}{clean(name)}/", depth + 1)
        finally:
            os.close(sub)

    def _open(self, fd: int, name: str, shown: str) -> None:
        if self.files >= self.limits.search_files:
            raise _Stop(
                f"... stopped after {self.files} files, the most search_files opens: give a "
                "smaller folder as path."
            )
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            file = os.open(name, flags, dir_fd=fd)
        except OSError:
            self.skipped["unreadable"] += 1
            return
        try:
            if stat.S_ISREG(os.fstat(file).st_mode):  # not swapped for a FIFO meanwhile
                self.file(file, shown)
        finally:
            os.close(file)

    def file(self, fd: int, shown: str) -> None:
        self.files += 1
        data = read_at_most(fd, self.limits.search_file_bytes + 1)
        if len(data) > self.limits.search_file_bytes:
            self.skipped[f"over {self.limits.search_file_bytes} bytes"] += 1
            return
        try:
            text = text_of(data, cut=False, size=len(data), shown=shown, tool="search_files")
        except Failed:
            self.skipped["binary"] += 1
            return
        pos = counted = 0
        line = 1
        while pos < len(text):
            try:
                found = self.pattern.search(text, pos, timeout=self._time_left(shown))
            except TimeoutError:
                raise self._out_of_time(shown) from None
            if found is None:
                return
            start = found.start()
            line, counted = line + text.count("\n", counted, start), start
            begin = text.rfind("\n", 0, start) + 1
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            if len(self.lines) == self.limits.search_lines:
                raise _Stop(
                    f"... stopped at {len(self.lines)} matching lines, the most search_files "
                    "returns: make the pattern or the path narrower."
                )
            matched = text[begin:end].rstrip("\r")
            if len(matched) > _SHOWN_LINE:
                matched = matched[:_SHOWN_LINE] + "..."
            self.lines.append(f"{shown}:{line}: {matched}")
            pos = end + 1

    def _time_left(self, shown: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._out_of_time(shown)
        return left

    def _out_of_time(self, shown: str) -> _Stop:
        self.timed_out = True
        return _Stop(
            f"... stopped after {self.limits.search_seconds} seconds, the most a search may "
            f"take, in {shown} (file {self.files} of the search): use a simpler pattern (no "
            "nested repeats such as (a+)+) or a smaller folder."
        )


_COUNT = regex.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")  # a counted repeat, `{m,n}`


def _search_files(located: Located, pattern: str, limits: FileLimits) -> ToolResponse:
    if len(pattern) > (most := limits.pattern_chars):
        raise Failed(f"The pattern is {len(pattern)} characters; at most {most}.")
    counts = [int(n) for match in _COUNT.finditer(pattern) for n in match.groups() if n]
    if any(count > limits.pattern_repeat for count in counts):
        raise Failed(f"A repeat count in the pattern is over {limits.pattern_repeat}: use less.")
    try:
        compiled = regex.compile(pattern, regex.MULTILINE)
    except regex.error as exc:
        raise Failed(f"The pattern {pattern!r} is not a regular expression: {exc}.") from None
    search = _Search(compiled, limits, time.monotonic() + limits.search_seconds)
    with Walk(located) as walk:
        name = walk.parents()
        _after_walk(located)
        fd, _ = walk.open_last(name, files=True, folders=True)
        stopped = None
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                search.folder(fd, "", 0)
            else:
                search.file(fd, clean(located.shown))
        except _Stop as stop:
            stopped = str(stop)
    if search.timed_out and not search.lines:
        raise Failed(f"search_files found nothing in {located.shown} in time. {stopped}")
    lines = search.lines or [
        f"No match for {pattern!r} in {located.shown} ({search.files} files searched)."
    ]
    if search.skipped:
        skips = ", ".join(f"{n} {why}" for why, n in sorted(search.skipped.items()))
        lines.append(f"(files skipped: {skips})")
    if stopped:
        lines.append(stopped)
    return _result(located, "\n".join(lines))


def _write_file(located: Located, content: str, limits: FileLimits) -> ToolResponse:
    data = _encoded(content, "content", limits)
    with Walk(located) as walk:
        name = walk.parents(create=True)
        _after_walk(located)
        if name is None:
            raise Failed(f"{located.shown} is a folder: give the path of a file in it.")
        folder = walk.folder()
        try:
            mode: int | None = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise Failed(f"{located.shown} is a folder: give the path of a file in it.")
        if mode is not None and stat.S_ISLNK(mode):
            raise Failed(
                f"{located.shown} is a symbolic link, which write_file does not replace: "
                "write to the file it leads to (list_dir shows it)."
            )
        if mode is not None and not stat.S_ISREG(mode):
            raise Denied(f"{located.shown} is a {kind_of(mode)}: write_file replaces files only.")
        put_file(folder, name, data, None if mode is None else stat.S_IMODE(mode))
    how = "new file" if mode is None else "replaced"
    return _result(located, f"Wrote {len(data)} bytes to {located.shown} ({how}).", untrusted=False)


def _edit_file(
    located: Located, old: str, new: str, replace_all: bool, limits: FileLimits
) -> ToolResponse:
    shown = located.shown
    if not old:
        raise Failed(f"old is empty: give the exact text of {shown} to replace.")
    with Walk(located) as walk:
        name = walk.parents()
        _after_walk(located)
        fd, name = walk.open_last(name, files=True, folders=False)
        st = os.fstat(fd)
        data = read_at_most(fd, limits.write_bytes + 1)
        if len(data) > limits.write_bytes:
            raise Failed(
                f"{shown} is over {limits.write_bytes} bytes, more than edit_file writes: "
                "edit a smaller file."
            )
        text = text_of(data, cut=False, size=st.st_size, shown=shown, tool="edit_file")
        count = text.count(old)
        if count == 0:
            raise Failed(
                f"old was not found in {shown}: read_file it and copy the text exactly, spaces "
                "and line ends included."
            )
        if count > 1 and not replace_all:
            raise Failed(
                f"old found {count} times in {shown}: give more context to make it unique, "
                "or set replace_all."
            )
        done = count if replace_all else 1
        grows = len(new.encode(errors="replace")) - len(old.encode(errors="replace"))
        if (size := len(data) + done * grows) > limits.write_bytes:  # before the text is built
            raise Failed(
                f"the result is {size} bytes, over the {limits.write_bytes} bytes a file tool "
                "writes: write less."
            )
        changed = _encoded(text.replace(old, new, -1 if replace_all else 1), "the result", limits)
        assert name is not None  # a regular file was opened, so by its name
        put_file(walk.folder(), name, changed, stat.S_IMODE(st.st_mode))
    done = count if replace_all else 1
    plural = "occurrence" if done == 1 else "occurrences"
    return _result(located, f"Replaced {done} {plural} in {shown}.", untrusted=False)


def _encoded(text: str, what: str, limits: FileLimits) -> bytes:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise Failed(f"{what} holds a lone surrogate, which is not text: remove it.") from None
    if len(data) > limits.write_bytes:
        raise Failed(
            f"{what} is {len(data)} bytes, over the {limits.write_bytes} bytes a file tool "
            "writes: write less."
        )
    return data
