"""A fork: a new session whose log is the first turns of another (SPEC section 20).

Its epochs are the source's up to the epoch the turn ended in, that one cut after the turn's
`turn_end`; every `session_start` names the new session (and the fork: the source and the
turn), so its chain is begun anew and its identity is its own (brokerd's grants for the source
are not the fork's). Its requests are the source's to that point byte for byte: the same
baseline, the same messages, the same slot, so the server may still hold the prefix. The whole
results and attachments its records name are copied; nothing after the turn is.
It is put in place as a new session is, from a hidden folder renamed whole.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import attrs
from attrs import frozen

from .. import layout
from ..proto import (
    Fork,
    LogRecord,
    RecallRecord,
    SessionId,
    SessionStartRecord,
    ToolResultRecord,
    TurnEndRecord,
    UserRecord,
    dumps,
)
from ..session import (
    Link,
    NoSuchSession,
    SessionError,
    SessionExists,
    header,
    parse_log,
    seal,
    sha256_hex,
    starts_turn,
    turn_starts,
)
from .fs import FileSystem, storage_errors
from .staging import put_in_place

__all__ = ["CannotFork", "Forked", "fork_session"]


class CannotFork(SessionError):
    """The turn asked for is not one the session has ended."""


@frozen
class Forked:
    """The fork made: its id, the epoch it is in, and the turns it holds."""

    session: SessionId
    epoch: int
    turns: int


def fork_session(
    home: Path,
    source: SessionId,
    turn: int | None,
    new: SessionId,
    fs: FileSystem | None = None,
) -> Forked:
    """Make session `new` from the first `turn` turns of `source` (None: all of them).

    Raises:
        NoSuchSession: `source` has no log.
        CannotFork: `source` has fewer ended turns than `turn` (or `turn` is under 1).
        SessionExists: `new` is there already.
        StorageError: reading or writing failed; nothing of the fork is left.
        TornLog: a log of `source` is not whole.
    """
    fs = fs or FileSystem()
    folder = layout.session_folder(home, source.value)
    target = layout.session_folder(home, new.value)
    with storage_errors(folder, reading=True):
        if not folder.is_dir():
            raise NoSuchSession(source)
        found = layout.epochs_in(fs.list_dir(folder))
        if not found:
            raise NoSuchSession(source)
        epochs = [_read(folder, epoch) for epoch in range(found[-1] + 1)]
    epoch, end = _end_of(epochs, turn)
    turn = turn if turn is not None else _turns_to(epochs, epoch, end)
    kept = [records for _, records in epochs[:epoch]] + [epochs[epoch][1][: end + 1]]
    files = _named_files([r for records in kept for r in records])
    staging = layout.sessions_folder(home) / layout.creating_name(new.value, secrets.token_hex(4))
    with storage_errors(target):
        if target.exists():
            raise SessionExists(new)
        try:
            fs.mkdir(staging)
            identity = ""
            for number, records in enumerate(kept):
                baseline, start = epochs[number][0], records[0]
                assert isinstance(start, SessionStartRecord)  # as the log's reader checked
                first = attrs.evolve(start, session=new, origin=identity, fork=Fork(source, turn))
                lines = _sealed([first, *records[1:]], sha256_hex(baseline))
                identity = identity or sha256_hex(lines[0])
                fs.write_new(staging / layout.baseline_name(number), baseline)
                fs.write_new(staging / layout.log_name(number), b"".join(lines))
            for name in files:
                fs.makedirs((staging / name).parent)
                fs.write_new(staging / name, fs.read(folder / name))
            fs.fsync_dir(staging)
            put_in_place(fs, staging, target, new)
        finally:
            fs.remove_tree(staging)
    return Forked(new, epoch, turn)


def _read(folder: Path, epoch: int) -> tuple[bytes, list[LogRecord]]:
    baseline = (folder / layout.baseline_name(epoch)).read_bytes()
    log = folder / layout.log_name(epoch)
    return baseline, parse_log(log.read_bytes(), log, sha256_hex(baseline)).records


def _end_of(epochs: list[tuple[bytes, list[LogRecord]]], turn: int | None) -> tuple[int, int]:
    """Where turn `turn` of the session ends (None: its last turn): its epoch and its
    `turn_end`'s index."""
    if turn is None:
        turn = sum(len(turn_starts(r, header(r).own_from)) for _, r in epochs)
    count = 0
    for epoch, (_, records) in enumerate(epochs):
        for start in turn_starts(records, header(records).own_from):
            count += 1
            if count == turn:
                for at in range(start + 1, len(records)):
                    if isinstance(records[at], TurnEndRecord):
                        return epoch, at
                    if isinstance(records[at], UserRecord) and starts_turn(records, at):
                        break  # it never ended (loopd stopped in it, and nothing healed it)
                raise CannotFork(f"turn {turn} has not ended")
    raise CannotFork(f"the session has {count} turns, not {turn}")


def _turns_to(epochs: list[tuple[bytes, list[LogRecord]]], epoch: int, end: int) -> int:
    """The turns that begin before index `end` of epoch `epoch`."""
    before = sum(len(turn_starts(r, header(r).own_from)) for _, r in epochs[:epoch])
    records = epochs[epoch][1]
    return before + len([at for at in turn_starts(records, header(records).own_from) if at < end])


def _named_files(records: list[LogRecord]) -> list[Path]:
    """The files the records name, in the session's folder: whole results and attachments,
    and the files a message carried (each with its text), each once."""
    names: list[Path] = []
    for record in records:
        if isinstance(record, UserRecord):
            hashes = [sha for file in record.files for sha in (file.sha256, file.text) if sha]
            names += [layout.turn_file(Path(), sha) for sha in hashes]
        if isinstance(record, ToolResultRecord | RecallRecord) and record.whole is not None:
            names.append(layout.result_file(Path(), record.call))
        if isinstance(record, ToolResultRecord):
            names += [layout.part_file(Path(), part.file) for part in record.kept]
    return list(dict.fromkeys(names))


def _sealed(records: list[LogRecord], genesis: str) -> list[bytes]:
    link, lines = Link(0, genesis), []
    for record in records:
        line, link = seal(dumps(record), link)
        lines.append(line)
    return lines
