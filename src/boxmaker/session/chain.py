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
from typing import Literal

from attrs import frozen

__all__ = ["NO_LINK", "ChainProblem", "Link", "chain_break", "seal"]

ChainProblem = Literal["hash_mismatch", "prev_mismatch", "seq_gap"]
_MARK = b',"hash":"'
_MARK_SIZE = len(_MARK)
_TAIL = _MARK_SIZE + 64 + 2  # the hash member and the closing `"}`


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


def chain_break(
    line: bytes, seq: object, prev: object, digest: object, last_seq: int, last_hash: str
) -> tuple[ChainProblem, str] | None:
    """What breaks the chain at `line` (without its newline), whose members are `seq`, `prev`
    and `hash`, after a line numbered `last_seq` with hash `last_hash`; None when it holds.
    Resume calls this for every line: it makes no object when the line holds."""
    if type(seq) is not int or seq != last_seq + 1:
        return "seq_gap", f"seq is {seq!r}, expected {last_seq + 1}"
    # The hash is the line's last member: `,"hash":"<64 hex digits>"}` closes it.
    mark = len(line) - _TAIL
    if type(digest) is not str or line[mark : mark + _MARK_SIZE] != _MARK or line[-2:] != b'"}':
        return "hash_mismatch", "the line does not end with its hash"
    hasher = hashlib.sha256(memoryview(line)[:mark])
    hasher.update(b"}")
    actual = hasher.hexdigest()
    if actual != digest:
        return "hash_mismatch", f"the line's bytes hash to {actual[:12]}…, not {digest[:12]}…"
    if prev != last_hash:
        return "prev_mismatch", (
            f"prev is {str(prev)[:12]}…, but the line before hashes to {last_hash[:12]}…"
        )
    return None
