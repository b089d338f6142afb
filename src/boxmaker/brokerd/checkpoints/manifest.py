"""What a root holds, as a value (`Manifest`: each path's `Entry`), its canonical bytes
(`encode`, `decode`, `manifest_id`), and what a change looks like to a person (`diff_text`).
No I/O: the walk that makes a manifest is `snapshot.py`; the one decision of an undo, which
compares manifests, is `plan.py`.

Two entries are equal when an undo has nothing to do between them: kind, permission bits,
owner, and the bytes (by their SHA-256) or the link's target. The modification time is kept
on the value for the stat cache only and is no part of the equality, nor of the bytes, so
equal manifests have equal bytes and equal ids.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import zlib
from typing import Any

from attrs import field, frozen

from .errors import CheckpointError

__all__ = [
    "KINDS",
    "MAX_MANIFEST",
    "Entry",
    "Manifest",
    "changed",
    "check_path",
    "decode",
    "diff_text",
    "encode",
    "is_id",
    "manifest_id",
    "parts_of",
    "shown_path",
]

KINDS = ("file", "dir", "link", "other")  # "other": a FIFO, socket or device; never read
MAX_MANIFEST = 1 << 28  # bytes of JSON: 100,000 entries take about 20 MB
_VERSION = 1
_SHA = re.compile(r"[0-9a-f]{64}")
_MOST_DIFF_BYTES = 256 * 1024  # difflib is slow on long inputs; a bigger file is summed up
_MOST_DIFF_LINES = 2_000  # lines a side: difflib's time grows as their square past this
_MOST_LINE = 400  # characters of one shown line of a diff, the rest said


@frozen
class Entry:
    """One path of a root, as an undo would put it back. `kind` is one of `KINDS`; `mode`
    its permission bits (`stat.S_IMODE`, set-uid and all); `size` and `sha256` (hex) a
    file's bytes; `target` a link's text (os.fsdecode'd, surrogateescape); `mtime_ns` is
    for the stat cache, compared by no one."""

    kind: str
    mode: int = 0
    uid: int = 0
    gid: int = 0
    size: int = 0
    sha256: str = ""
    target: str = ""
    mtime_ns: int = field(default=0, eq=False)


Manifest = dict[str, Entry]  # relative POSIX path ("a/b", never "" nor the root) -> Entry


def changed(a: Manifest, b: Manifest) -> set[str]:
    """The paths added, removed or changed from `a` to `b`."""
    return {path for path in a.keys() | b.keys() if a.get(path) != b.get(path)}


def is_id(text: str) -> bool:
    """Whether `text` is a SHA-256 in hex as the store names blobs (64 digits 0-9, a-f)."""
    return _SHA.fullmatch(text) is not None


def parts_of(path: str) -> tuple[str, ...]:
    """`path`'s components, in order (a folder's sorts before everything beneath it)."""
    return tuple(path.split("/"))


def check_path(path: str) -> str | None:
    """Why `path` cannot be a manifest's key (None: it can): it must be relative, with no
    empty, `.` or `..` component and no NUL, so no key leads out of its root."""
    if not path or "\0" in path:
        return "is empty or holds a NUL"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "is not a plain relative path (an empty, '.' or '..' component)"
    return None


def encode(manifest: Manifest) -> bytes:
    """`manifest`'s canonical bytes: its entries sorted by path as compact JSON (ASCII, so a
    name that is not UTF-8 keeps its surrogates as escapes), compressed with zlib."""
    rows = [
        [path, e.kind, e.mode, e.uid, e.gid, e.size, e.sha256, e.target]
        for path, e in sorted(manifest.items())
    ]
    text = json.dumps({"version": _VERSION, "entries": rows}, separators=(",", ":"))
    return zlib.compress(text.encode("ascii"), 6)


def manifest_id(manifest: Manifest) -> str:
    """The SHA-256 (hex) of `encode(manifest)`: its name in the objects store."""
    return hashlib.sha256(encode(manifest)).hexdigest()


def decode(data: bytes, most: int = MAX_MANIFEST) -> Manifest:
    """The manifest `encode` made `data` from, checked row by row (modification times are 0).

    Raises:
        CheckpointError: `data` is not a manifest, is bigger than `most` bytes unpacked, or
            a row is malformed (the message names the row).
    """
    unpack = zlib.decompressobj()
    try:
        text = unpack.decompress(data, most)
    except zlib.error as exc:
        raise CheckpointError(f"a manifest is not zlib data: {exc}") from exc
    if unpack.unconsumed_tail:
        raise CheckpointError(f"a manifest holds more than {most} bytes unpacked")
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"a manifest is not JSON: {exc}") from exc
    if not isinstance(whole, dict) or whole.get("version") != _VERSION:
        raise CheckpointError(f"a manifest is not version {_VERSION} of the format")
    rows = whole.get("entries")
    if not isinstance(rows, list):
        raise CheckpointError("a manifest has no list of entries")
    manifest: Manifest = {}
    for number, row in enumerate(rows, 1):
        path, entry = _row(row, number)
        if path in manifest:
            raise CheckpointError(f"a manifest's row {number} repeats the path {path!r}")
        manifest[path] = entry
    return manifest


def _row(row: Any, number: int) -> tuple[str, Entry]:
    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"a manifest's row {number} {why}")

    if not isinstance(row, list) or len(row) != 8:
        raise bad("is not a list of 8 values")
    path, kind, mode, uid, gid, size, sha, target = row
    if not all(isinstance(v, str) for v in (path, kind, sha, target)):
        raise bad("has a path, kind, hash or target that is not a string")
    if not all(type(v) is int and v >= 0 for v in (mode, uid, gid, size)):
        raise bad("has a mode, owner or size that is not a whole number >= 0")
    why = check_path(path)
    if why is not None:
        raise bad(f"has a path that {why}")
    if kind not in KINDS or mode > 0o7777:
        raise bad(f"has kind {kind!r} (one of {', '.join(KINDS)}) or mode {mode:o}")
    if (kind == "file") != is_id(sha) or (kind != "file" and sha):
        raise bad("has a hash that is not 64 hex digits on a file, or one on another kind")
    if kind != "link" and target:
        raise bad("has a link target on another kind")
    return path, Entry(kind, mode, uid, gid, size, sha, target)


def diff_text(old: bytes | None, new: bytes | None, path: str, most_lines: int = 200) -> str:
    """A file's change from `old` to `new` (None: no file) as a person reads it: a unified
    diff when both are text (UTF-8, no NUL), at most `most_lines` lines, the middle left out
    with a line saying how many; else one line with the sizes."""
    before, after = _text(old), _text(new)
    if before is None or after is None:
        longest = max(len(old or b""), len(new or b""))
        kind = "binary file" if longest <= _MOST_DIFF_BYTES else "file too long to show"
        return f"{kind}, {_size(old)} → {_size(new)}"
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    if max(len(a), len(b)) > _MOST_DIFF_LINES:
        return f"text too long to diff, {len(a):,} lines → {len(b):,} lines"
    shown = shown_path(path)
    old_name = "/dev/null" if old is None else f"a/{shown}"
    new_name = "/dev/null" if new is None else f"b/{shown}"
    lines = [_cut(line) for line in difflib.unified_diff(a, b, old_name, new_name)]
    if len(lines) > most_lines:
        head = most_lines // 2
        tail = most_lines - head
        left_out = len(lines) - head - tail
        lines = [*lines[:head], f"… {left_out} lines left out …\n", *lines[len(lines) - tail :]]
    return "".join(lines)


def _text(data: bytes | None) -> str | None:
    """`data` as text, "" for no file; None when binary or too long to diff."""
    if data is None:
        return ""
    if len(data) > _MOST_DIFF_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _size(data: bytes | None) -> str:
    return "none" if data is None else f"{len(data)} bytes"


def _cut(line: str) -> str:
    """A diff's line, ending in a newline, at most `_MOST_LINE` characters and the rest said."""
    line = line.rstrip("\n")
    if len(line) > _MOST_LINE:
        line = f"{line[:_MOST_LINE]}… [{len(line) - _MOST_LINE:,} more characters]"
    return line + "\n"


def shown_path(path: str) -> str:
    """`path` as a header line cannot be forged with: not UTF-8 as U+FFFD, controls escaped."""
    text = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
