"""The hash chain of a log, as agentloop's transcript has it. Pure.

Every line of a log carries, after its record's own fields, `seq` (its line number, from 1),
`prev` (the `hash` of the line before it; for line 1, the SHA-256 of the epoch's baseline file)
and `hash`: the SHA-256 of the line's own bytes up to its `hash` member, closed with `}`:

    {"type":"user","time":"…","content":"hi","seq":2,"prev":"9f86…","hash":"3a7b…"}
    hash = sha256(b'{"type":"user","time":"…","content":"hi","seq":2,"prev":"9f86…"}')

So a changed byte anywhere in a line breaks that line's `hash` (`hash_mismatch`), a line
rewritten with a new hash breaks the next line's `prev` (`prev_mismatch`), and a line taken
out or moved breaks the numbering (`seq_gap`). A chain proves that the lines present are
unchanged and in order, not that none is missing from the end: the last acknowledged turn is
kept outside the log for that (`index.json`, docs/storage.md).

Logs written before the chain have no `seq`, `prev` or `hash`. They stay readable: unchained
lines may stand at the start of a log, and the first chained line after them has as `prev` the
SHA-256 of all the bytes before it, which binds them into the chain from there on.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from attrs import frozen

__all__ = ["NO_LINK", "ChainProblem", "Link", "seal", "unseal"]

ChainProblem = Literal["hash_mismatch", "prev_mismatch", "seq_gap"]
_MARK = b',"hash":"'
_TAIL = len(_MARK) + 64 + 2  # the hash member and the closing `"}`


@frozen
class Link:
    """The end of a chain so far: the number and hash of its last line (`seq` 0 and the
    baseline's hash before line 1)."""

    seq: int
    hash: str


NO_LINK = Link(0, "")  # no line at all


def seal(record: bytes, link: Link) -> tuple[bytes, Link]:
    """The line (with its newline) for a record's compact JSON after `link`, and the new end.

    The record's JSON must be one object (`{...}`), as `proto.dumps` writes it.
    """
    seq = link.seq + 1
    head = b'%s,"seq":%d,"prev":"%s"' % (record[:-1], seq, link.hash.encode())
    digest = hashlib.sha256(head + b"}").hexdigest()
    return head + _MARK + digest.encode() + b'"}\n', Link(seq, digest)


def unseal(
    line: bytes, value: dict[str, Any], expected: Link
) -> tuple[Link, ChainProblem | None, str]:
    """Check a chained line (without its newline) against the link before it; take `seq`,
    `prev` and `hash` out of its parsed `value`, leaving the record's own fields.

    Returns:
        The new end of the chain, and the problem (`None` when the line holds) with a sentence.
    """
    seq, prev, digest = value.pop("seq", None), value.pop("prev", None), value.pop("hash", None)
    if type(seq) is not int or seq != expected.seq + 1:
        return expected, "seq_gap", f"seq is {seq!r}, expected {expected.seq + 1}"
    # The hash is the line's last member: `,"hash":"<64 hex digits>"}` closes it.
    mark = len(line) - _TAIL
    if (
        type(digest) is not str
        or line[mark : mark + len(_MARK)] != _MARK
        or not line.endswith(b'"}')
    ):
        return expected, "hash_mismatch", "the line does not end with its hash"
    hasher = hashlib.sha256(memoryview(line)[:mark])
    hasher.update(b"}")
    actual = hasher.hexdigest()
    if actual != digest:
        reason = f"the line's bytes hash to {actual[:12]}…, not {digest[:12]}…"
        return expected, "hash_mismatch", reason
    if prev != expected.hash:
        return (
            Link(seq, digest),
            "prev_mismatch",
            (f"prev is {str(prev)[:12]}…, but the line before hashes to {expected.hash[:12]}…"),
        )
    return Link(seq, digest), None, ""
