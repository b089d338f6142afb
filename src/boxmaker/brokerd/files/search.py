"""`search_files {pattern, path?}`: a regular expression over the files beneath a path, every
part of it bounded: the pattern's size before it is compiled, the files opened, the bytes read
from each, the lines returned, and the time of the whole search (the `regex` module's
`timeout=`, from what is left).

The pattern's size is read with the `regex` module's own parser, before anything is compiled:
`regex` writes each counted repeat out as that many copies, so nested counts multiply
(`(?:(?:a{1000}){1000}){1000}`, 32 characters, takes gigabytes and minutes to compile, and no
timeout covers a compile). The parts of the parsed pattern are counted, each as many times as
the repeats around it copy it (their `min_count`), and a pattern past `pattern_size` parts is
refused unread: what it compiles to is then at most a few megabytes, in milliseconds.

A match is bounded in memory too: what `regex` keeps while it backs off grows with the line it
searches and the groups it captures (200 groups over a line of 1 MiB took 800 MiB). So each
line is searched alone, a line over `search_line_chars` is not searched (and said), a pattern
capturing more than `pattern_groups` groups is refused, and brokerd runs at most
`SEARCHES_AT_ONCE` searches at once.

The walk is `_walk.py`'s rules for a folder: links are not followed, only regular files are
opened, and the roots inside the searched one (its `Fence`) are kept to theirs: a closed one
is skipped, and an open one raises the result's class to its own.
"""

from __future__ import annotations

import importlib
import os
import stat
import time
from collections import Counter
from typing import Any

import regex
from attrs import define, field

from ...proto import DataClass, ResultResponse, ToolResponse
from . import _walk
from ._walk import Fixable, Walk, clean, identity_of, read_at_most, text_of
from .limits import FileLimits
from .roots import Fence, Located, highest

__all__ = ["SEARCHES_AT_ONCE", "pattern_size", "search_files"]

SEARCHES_AT_ONCE = 2  # brokerd's searches running together: each may take a few hundred MiB

# The `regex` module's own parser (its compile's first step), untyped: what it parses is read
# here exactly as compile would read it, with no parser of ours to disagree with it.
_core: Any = importlib.import_module("regex._regex_core")
_SHOWN_LINE = 200  # characters of a matching line search_files shows
_DEEPEST = 64  # folders below the searched one that search_files enters


def pattern_size(pattern: str, most: int) -> int:
    """How many parts `pattern` compiles to, its counted repeats written out, counted up to
    `most + 1` (then it stops: the rest is not looked at). Parsed as `regex.compile` parses.

    Raises:
        regex.error: it is not a regular expression.
    """
    return _measured(pattern, most)[0]


def _measured(pattern: str, most: int) -> tuple[int, int]:
    """`pattern_size`'s count, and how many groups the pattern captures."""
    flags = 0
    while True:  # as regex's own compile: a flag set past the start parses it again
        source = _core.Source(pattern)
        info = _core.Info(flags, source.char_type, {})
        source.ignore_space = bool(info.flags & regex.VERBOSE)
        source.use_unicode_space(bool(info.flags & regex.VERSION1))
        try:
            parsed = _core._parse_pattern(source, info)
            break
        except _core._UnscopedFlagSet:
            flags = info.global_flags
        except RecursionError:
            raise regex.error("it nests too deep") from None
    total = 0
    pending: list[tuple[object, int]] = [(parsed, 1)]
    seen: set[int] = set()
    while pending and total <= most:
        node, copies = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        total += copies
        if isinstance(node, _core.GreedyRepeat):  # lazy and possessive ones too
            copies = min(copies * max(1, node.min_count), most + 1)
        for value in vars(node).values():
            items = value if isinstance(value, list | tuple) else (value,)
            pending += [(item, copies) for item in items if isinstance(item, _core.RegexBase)]
    return min(total, most + 1), int(info.group_count)


def compiled(pattern: str, limits: FileLimits) -> regex.Pattern[str]:
    """`pattern` compiled, once it is known to be small enough.

    Raises:
        Fixable: it is too long, too big once written out, or not a regular expression.
    """
    if len(pattern) > (most := limits.pattern_chars):
        raise Fixable(f"The pattern is {len(pattern)} characters; at most {most}.")
    try:
        size, groups = _measured(pattern, limits.pattern_size)
        if size > limits.pattern_size:
            raise Fixable(
                f"The pattern is too big once its repeats are written out (over "
                f"{limits.pattern_size:,} parts: nested counts multiply): use smaller counts, "
                "or + and * instead."
            )
        if groups > (most := limits.pattern_groups):  # each kept at every step a match backs
            raise Fixable(
                f"The pattern has {groups} capturing groups; at most {most}: use "
                "(?:...) where nothing is captured."
            )
        return regex.compile(pattern, regex.MULTILINE)
    except regex.error as exc:
        raise Fixable(f"The pattern {pattern!r} is not a regular expression: {exc}.") from None


class _Stop(Exception):
    """A bound of search_files was reached; `str()` is the last line of the answer."""


@define
class _Search:
    pattern: regex.Pattern[str]
    limits: FileLimits
    deadline: float
    fence: Fence
    data_class: DataClass  # the highest of the roots searched
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
            other = self.fence.get(identity_of(os.fstat(sub)))
            if other is not None and other.closed:  # never searched from another root
                self.skipped["closed roots"] += 1
                return
            if other is not None:
                self.data_class = highest(self.data_class, other.data_class)
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
            st = os.fstat(file)
            if st.st_nlink > 1 and st.st_dev in self.fence.linked:
                self.skipped["files with other names (hard links) where a closed root is"] += 1
            elif stat.S_ISREG(st.st_mode):  # not swapped for a FIFO meanwhile
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
        except Fixable:
            self.skipped["binary"] += 1
            return
        longest = self.limits.search_line_chars
        for number, line in enumerate(text.split("\n"), start=1):
            if len(line) > longest:  # what a match keeps grows with its line
                self.skipped[f"lines over {longest:,} characters (not searched)"] += 1
                continue
            try:
                found = self.pattern.search(line, timeout=self._time_left(shown))
            except TimeoutError:
                raise self._out_of_time(shown) from None
            except MemoryError:
                raise self._out_of_memory(shown) from None
            if found is None:
                continue
            if len(self.lines) == self.limits.search_lines:
                raise _Stop(
                    f"... stopped at {len(self.lines)} matching lines, the most search_files "
                    "returns: make the pattern or the path narrower."
                )
            matched = line.rstrip("\r")
            if len(matched) > _SHOWN_LINE:
                matched = matched[:_SHOWN_LINE] + "..."
            self.lines.append(f"{shown}:{number}: {matched}")

    def _time_left(self, shown: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._out_of_time(shown)
        return left

    def _out_of_memory(self, shown: str) -> _Stop:
        self.timed_out = True
        return _Stop(
            f"... stopped in {shown}: the pattern took more memory than there is: use "
            "a simpler one (fewer groups and nested repeats)."
        )

    def _out_of_time(self, shown: str) -> _Stop:
        self.timed_out = True
        return _Stop(
            f"... stopped after {self.limits.search_seconds} seconds, the most a search may "
            f"take, in {shown} (file {self.files} of the search): use a simpler pattern (no "
            "nested repeats such as (a+)+) or a smaller folder."
        )


def search_files(located: Located, fence: Fence, pattern: str, limits: FileLimits) -> ToolResponse:
    """search_files' answer: `file:line: text` for each matching line, in sorted depth-first
    order, then what was skipped and where a bound stopped it.

    Raises:
        Fixable: the pattern is refused, or nothing was found before the time ran out.
        Denied: the path leads out of its root or into a closed root.
        OSError: from the disk (the caller says it).
    """
    search = _Search(
        compiled(pattern, limits),
        limits,
        time.monotonic() + limits.search_seconds,
        fence,
        located.root.data_class,
    )
    with Walk(located, fence) as walk:
        name = walk.parents()
        _walk.after_walk(located)
        fd, _ = walk.open_last(name, files=True, folders=True)
        search.data_class = highest(search.data_class, walk.data_class)
        stopped = None
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                search.folder(fd, "", 0)
            else:
                search.file(fd, clean(located.shown))
        except _Stop as stop:
            stopped = str(stop)
    skips = ", ".join(f"{n} {why}" for why, n in sorted(search.skipped.items()))
    if search.timed_out and not search.lines:
        skipped = f" (skipped: {skips})" if skips else ""
        raise Fixable(f"search_files found nothing in {located.shown} in time{skipped}. {stopped}")
    lines = search.lines or [
        f"No match for {pattern!r} in {located.shown} ({search.files} files searched)."
    ]
    if skips:
        lines.append(f"(skipped: {skips})")
    if stopped:
        lines.append(stopped)
    return ResultResponse("\n".join(lines), search.data_class, untrusted=True, truncated=False)
