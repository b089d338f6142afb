"""The sessions of a home as `bxctl sessions`, `show`, `verify` and `rm` read them, straight
from their files. No loopd is needed and none is disturbed: these only read, except
`remove_session`, which first takes the lock loopd holds on a log while it runs a turn on it.

Listing reads each session's small `index.json` (and, for a session without one, the first
lines of its log), never a whole log: a thousand sessions list in a fraction of a second.
`show` reads the current epoch (the highest log), or every one; `verify` checks the current
epoch's log (its lines, chain, layout and order, and its end against `index.json`) and says
how many came before it; with every epoch it checks each of them too, that each ends with its
`epoch_end`, and that the turns an epoch carried are the very records its predecessor ended
with. It checks too that each whole result a `tool_result` names is in `results/` as its
hash says. Blocking calls.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from attrs import frozen

from .. import layout
from ..proto import (
    Baseline,
    DecodeError,
    EpochEndRecord,
    LogRecord,
    SessionStartRecord,
    SummaryRecord,
    ToolResultRecord,
    UserRecord,
    loads,
    parse_json,
)
from ..session import (
    EpochView,
    Index,
    Log,
    Problem,
    SessionError,
    TornLog,
    check_log,
    decided_parts,
    epoch_view,
    first_words,
    header,
    opening_parts,
    parse_baseline,
    parse_log,
    session_start,
    sha256_hex,
    turns_of,
)

__all__ = [
    "InTurn",
    "Listed",
    "check_epochs",
    "current_epoch",
    "entries",
    "entry",
    "epoch_views",
    "held_for_removal",
    "log_path",
    "remove_session",
    "session_folders",
]

HEAD = 64 * 1024  # what is read of a log without an index: its first lines


class InTurn(SessionError):
    """loopd is in a turn on the session (it holds its log's lock)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        super().__init__(f"session {folder.name} is in a turn; remove it when it ends")


@frozen
class Listed:
    """A session as `bxctl sessions` lists it; `index` is None when the session has none yet
    (made before index.json existed, or before its first turn ended)."""

    id: str
    created: datetime | None
    last_turn: datetime | None
    index: Index | None
    first: str


def session_folders(home: Path) -> list[Path]:
    """The session folders of `home` (hidden names are creations or removals under way)."""
    root = layout.sessions_folder(home)
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    return [root / name for name in names if not layout.is_hidden(name)]


def entry(folder: Path) -> Listed:
    """What `sessions` shows of a session, from its index, else from the head of its log."""
    with contextlib.suppress(OSError, DecodeError):
        index = loads(Index, (folder / layout.INDEX).read_bytes())
        last = index.last_turn.value if index.last_turn else None
        return Listed(folder.name, index.created.value, last, index, index.first)
    first_log = folder / layout.log_name(0)  # epoch 0's log has the session's first lines
    try:
        with first_log.open("rb") as log:
            head = log.read(HEAD)
        start = session_start(head, first_log)
    except (OSError, TornLog):
        return Listed(folder.name, None, None, None, "(its log cannot be read)")
    second = head.split(b"\n", 2)[1:2]
    first = ""
    if second and b'"type":"user"' in second[0][:20]:
        with contextlib.suppress(DecodeError):
            first = first_words(_content_of(second[0]))
    return Listed(folder.name, start.time.value, None, None, first)


def _content_of(line: bytes) -> str:
    """The `content` of a user record's line, chained or not."""
    value = parse_json(line)
    content = value.get("content") if isinstance(value, dict) else None
    return content if isinstance(content, str) else ""


def entries(home: Path) -> list[Listed]:
    """Every session of `home`, the most recent first (last turn, else creation)."""
    found = [entry(folder) for folder in session_folders(home)]
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(found, key=lambda e: (e.last_turn or e.created or epoch, e.id), reverse=True)


def current_epoch(folder: Path) -> int:
    """The session's current epoch: its highest log (0 when the folder cannot say)."""
    try:
        return max(layout.epochs_in(os.listdir(folder)), default=0)
    except OSError:
        return 0


def log_path(folder: Path, epoch: int | None = None) -> Path:
    """The log of `epoch`, by default the current one."""
    return folder / layout.log_name(current_epoch(folder) if epoch is None else epoch)


def _read(folder: Path, epoch: int) -> tuple[bytes, str, Baseline | None]:
    """An epoch's log's bytes, the sha256 of its baseline file (its chain's start), and the
    baseline (for a fenced session's tool blocks; None if it cannot be read).

    Raises:
        OSError: a file cannot be read.
    """
    data = (folder / layout.log_name(epoch)).read_bytes()
    baseline = (folder / layout.baseline_name(epoch)).read_bytes()
    try:
        parsed: Baseline | None = parse_baseline(baseline)
    except DecodeError:
        parsed = None
    return data, sha256_hex(baseline), parsed


def epoch_views(folder: Path, *, every: bool) -> list[EpochView]:
    """The current epoch's view, or with `every` each epoch's, oldest first.

    Raises:
        OSError: a file cannot be read.
        TornLog: a log is not whole (`bxctl verify` says more).
    """
    current = current_epoch(folder)
    views = []
    for epoch in range(current + 1) if every else [current]:
        data, genesis, baseline = _read(folder, epoch)
        log = parse_log(data, folder / layout.log_name(epoch), genesis)
        views.append(epoch_view(log.records, baseline))
    return views


def check_epochs(folder: Path, *, every: bool) -> Problem | str:
    """The first problem of the session's current epoch (of every epoch with `every`), or
    what was checked, in a few words."""
    current = current_epoch(folder)
    index: Index | None = None
    try:
        index = loads(Index, (folder / layout.INDEX).read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, DecodeError) as exc:
        return Problem(folder / layout.INDEX, 0, f"not an index: {exc}")
    checked: list[Log] = []
    baseline: Baseline | None = None
    origin = ""  # the session's identity, read from epoch 0
    for epoch in range(current + 1) if every else [current]:
        path = folder / layout.log_name(epoch)
        try:
            data, genesis, baseline = _read(folder, epoch)
        except OSError as exc:
            return Problem(path, 0, f"cannot read: {exc.strerror or exc}")
        end = index if epoch == current else None
        log = check_log(data, path, genesis, end, epoch=epoch, baseline=baseline)
        if isinstance(log, Problem):
            return log
        if checked and (problem := _follows(checked[-1].records, log.records, path)):
            return problem
        start = log.records[0]
        if epoch == 0:
            origin = sha256_hex(data[: data.find(b"\n") + 1])
        elif origin and isinstance(start, SessionStartRecord) and start.origin not in ("", origin):
            return Problem(
                path,
                1,
                "session_start's origin is not the hash of epoch 0's first "
                "line: the session is named as another",
            )
        if problem := _kept_results(folder, log.records, path):
            return problem
        checked.append(log)
    log = checked[-1]
    turns = len(turns_of(log.records, baseline=baseline))
    before = f"epoch {current}, {current} before it{' checked too' if every else ''}: "
    chained = (
        "chain whole"
        if log.chained_from == 0
        else (f"written before the chain up to line {log.chained_from}")
    )
    notes = "" if index is not None else f"; no {layout.INDEX} to compare its end with"
    if isinstance(log.records[-1], EpochEndRecord):
        notes += "; a new epoch was decided and is opened when loopd next resumes the session"
    return f"{before if current else ''}{turns} turns, {len(log.records)} records, {chained}{notes}"


_PART = re.compile(r"[0-9]+\.[0-9]+\.[a-z0-9]+")  # `<call>.<part>.<ext>`, as loopd names them


def _kept_results(folder: Path, records: Sequence[LogRecord], path: Path) -> Problem | None:
    """Whether each whole result and attachment a `tool_result` names, and each file (and
    text taken from one) a `user` record names, is there, as its hash says."""
    for at, record in enumerate(records):
        if isinstance(record, UserRecord):
            kept_files = []
            for file in record.files:
                for sha in filter(None, (file.sha256, file.text)):
                    kept = layout.turn_file(folder, sha)
                    kept_files.append((f"the file {file.name!r} ({kept})", kept, sha))
            if problem := _hashes(kept_files, path, at):
                return problem
        if not isinstance(record, ToolResultRecord):
            continue
        whole = layout.result_file(folder, record.call)
        files = [(f"the whole result {whole}", whole, record.whole)] if record.whole else []
        for part in record.kept:
            if not _PART.fullmatch(part.file):
                return Problem(path, at + 1, f"an attachment is named {part.file!r}")
            kept = layout.part_file(folder, part.file)
            files.append((f"the attachment {kept}", kept, part.sha256))
        if problem := _hashes(files, path, at):
            return problem
    return None


def _hashes(files: Sequence[tuple[str, Path, str]], path: Path, at: int) -> Problem | None:
    """The first of `files` (each said, its path, its hash) missing or not what its hash says."""
    for shown, kept, sha in files:
        try:
            data = kept.read_bytes()
        except OSError as exc:
            return Problem(path, at + 1, f"{shown} cannot be read: {exc.strerror}")
        if sha256_hex(data) != sha:
            return Problem(path, at + 1, f"{shown} is not what its hash says")
    return None


def _follows(old: Sequence[LogRecord], new: Sequence[LogRecord], path: Path) -> Problem | None:
    """Whether epoch `new` opens as the `epoch_end` of `old` decided: the turns it carries are
    the records the old one ended with."""
    end = old[-1]
    if not isinstance(end, EpochEndRecord):
        return Problem(path, 1, "the epoch before this one does not end with its epoch_end")
    head = header(new)
    opened = head.start
    if opened is None or opened.carried_turns != end.carried_turns:
        return Problem(path, 2, "epoch_start does not carry the turns the last epoch_end chose")
    first = head.carried_from
    decided = decided_parts(old, header(old))
    leveled = all(isinstance(r, SummaryRecord) and r.first is not None for r in new[2:first])
    if leveled and opening_parts(new, head) != decided:  # (one from before levels: as it was)
        return Problem(path, 3, "the summaries are not the ones the last epoch_end chose")
    carried = list(new[first : head.own_from])
    if carried and list(old[len(old) - 1 - len(carried) : -1]) != carried:
        line = first + 1
        return Problem(path, line, "the turns carried are not the ones the last epoch ended with")
    return None


@contextlib.contextmanager
def held_for_removal(folder: Path) -> Iterator[None]:
    """Hold the session's current log's lock for the block, as loopd holds it for a turn.

    Raises:
        InTurn: loopd holds it (or a new epoch opened meanwhile, whose log it holds).
        OSError: the log cannot be opened.
    """
    log = log_path(folder)
    fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise InTurn(folder) from exc
        if log_path(folder) != log:  # a new epoch opened meanwhile: its log is the one held
            raise InTurn(folder)
        yield
    finally:
        os.close(fd)


def remove_session(folder: Path) -> None:
    """Take the session out of sight in one step (a hidden name is no session), then delete
    it; the caller holds it (`held_for_removal`).

    Raises:
        OSError: the folder cannot be renamed or removed.
    """
    gone = folder.with_name(layout.removing_name(folder.name, secrets.token_hex(4)))
    folder.rename(gone)
    shutil.rmtree(gone)
