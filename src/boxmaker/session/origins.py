"""The origin index of a session, `<id>/origins.jsonl`, as lines and what they mean. Pure.

A turn frame may name its `origin` (`{channel, id}`: a chat message's event id, a schedule's
firing), kept in its `user` record; a session runs one turn per origin. So that loopd can
tell an origin it already ran without reading the log, each session keeps an index beside
it, derived from its logs and read forward from where it last stopped:

    {"channel":"matrix","id":"$e1","epoch":0,"at":1834}
    {"epoch":0,"from":5120,"hash":"9f86…"}

The first says that origin's `user` record starts at byte 1834 of epoch 0's log; the second
(a mark) that the index holds every origin of epoch 0's log up to and with the line that
starts at byte 5120, whose chain `hash` is `9f86…`. Nothing here is the truth: a place is
checked against the log before it is believed, a mark whose line is no longer there (a log
cut back) makes the index be built again from the logs, and so does a missing or damaged
file. A turn carried into a new epoch is found there again, and its newest place wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from ..proto import (
    AssistantRecord,
    LogRecord,
    Origin,
    Outcome,
    TurnEndRecord,
    encode,
    parse_line,
)

__all__ = [
    "USER_PREFIX",
    "Mark",
    "Place",
    "Recorded",
    "line_hash",
    "mark_line",
    "place_line",
    "read_index_line",
    "recorded",
]

USER_PREFIX = b'{"type":"user",'  # how every `user` line of a log starts
MOST = 1 << 48  # past any log's size or epoch: a larger number is a damaged line
_HASH_TAIL = 66  # `<64 hex digits>"}` closes every chained line (its newline left off)
_HEX = frozenset(b"0123456789abcdef")


@frozen
class Place:
    """Where a `user` record is: its epoch's log, and the byte its line starts at."""

    epoch: int
    at: int


@frozen
class Mark:
    """How far the index has read: through the line of epoch `epoch`'s log that starts at
    byte `start`, whose chain hash is `hash`."""

    epoch: int
    start: int
    hash: str


@frozen
class Recorded:
    """How an origin's turn went, as its log says: the `turn_end`'s outcome (`running` when
    it has none yet) and, for a turn that ended `done`, its answer."""

    outcome: str
    content: str | None = None


def place_line(origin: Origin, place: Place) -> bytes:
    return (
        encode({"channel": origin.channel, "id": origin.id, "epoch": place.epoch, "at": place.at})
        + b"\n"
    )


def mark_line(mark: Mark) -> bytes:
    return encode({"epoch": mark.epoch, "from": mark.start, "hash": mark.hash}) + b"\n"


def read_index_line(line: bytes) -> tuple[Origin, Place] | Mark | None:
    """An index line's meaning; None for one that is not an index line (a damaged file)."""
    value: Any = parse_line(line)
    if type(value) is not dict:
        return None
    epoch = value.get("epoch")
    if type(epoch) is not int or not 0 <= epoch < MOST:
        return None
    if value.keys() == {"channel", "id", "epoch", "at"}:
        at = value["at"]
        try:
            origin = Origin(value["channel"], value["id"])
        except ValueError:
            return None
        return (origin, Place(epoch, at)) if type(at) is int and 0 <= at < MOST else None
    if value.keys() == {"epoch", "from", "hash"}:
        start, digest = value["from"], value["hash"]
        if type(start) is int and 0 <= start < MOST and type(digest) is str and len(digest) == 64:
            return Mark(epoch, start, digest)
    return None


def line_hash(line: bytes) -> str | None:
    """The chain hash a log line (without its newline) ends with; None for a line without
    one (written before the chain)."""
    tail = line[-_HASH_TAIL:]
    digest = tail[:64]
    if len(tail) != _HASH_TAIL or tail[64:] != b'"}' or not set(digest) <= _HEX:
        return None
    return digest.decode()


def recorded(records: Sequence[LogRecord]) -> Recorded:
    """How the turn went whose records start at an origin's `user` record (that record
    first, a soft break's message included: it ends with the turn it went into) and run to
    the log's end or further: its first `turn_end` after them, and the answer of a turn that
    ended `done` (its last completion: a turn ends `done` on one without tool calls)."""
    answer: str | None = None
    for record in records[1:]:
        if isinstance(record, AssistantRecord):
            answer = record.content
        elif isinstance(record, TurnEndRecord):
            done = record.outcome is Outcome.DONE
            return Recorded(record.outcome.value, (answer or "") if done else None)
    return Recorded("running")
