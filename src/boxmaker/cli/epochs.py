"""A session's epochs as `bxctl show` and `verify` read them, straight from the files: the
current epoch (the highest `<n>.jsonl`), or every one with `--all`.

`verify` checks the current epoch's log (its lines, chain, layout and order, and its end
against `index.json`) and says how many came before it; with `--all` it checks each of them
too, that each ends with its `epoch_end`, and that the turns an epoch carried are the very
records its predecessor ended with.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..proto import Baseline, DecodeError, EpochEndRecord, LogRecord, SummaryRecord, loads
from ..session import (
    EpochView,
    Index,
    Log,
    Problem,
    baseline_name,
    check_log,
    epoch_view,
    epochs_in,
    header,
    log_name,
    parse_baseline,
    parse_log,
    sha256_hex,
    turns_of,
)

__all__ = ["INDEX", "check_epochs", "current_epoch", "epoch_views", "log_path"]

INDEX = "index.json"


def current_epoch(folder: Path) -> int:
    """The session's current epoch: its highest log (0 when the folder cannot say)."""
    try:
        return max(epochs_in(os.listdir(folder)), default=0)
    except OSError:
        return 0


def log_path(folder: Path, epoch: int | None = None) -> Path:
    """The log of `epoch`, by default the current one."""
    return folder / log_name(current_epoch(folder) if epoch is None else epoch)


def _read(folder: Path, epoch: int) -> tuple[bytes, str, Baseline | None]:
    """An epoch's log's bytes, the sha256 of its baseline file (its chain's start), and the
    baseline (for a fenced session's tool blocks; None if it cannot be read).

    Raises:
        OSError: a file cannot be read.
    """
    data = (folder / log_name(epoch)).read_bytes()
    baseline = (folder / baseline_name(epoch)).read_bytes()
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
        log = parse_log(data, folder / log_name(epoch), genesis)
        views.append(epoch_view(log.records, baseline))
    return views


def check_epochs(folder: Path, *, every: bool) -> Problem | str:
    """The first problem of the session's current epoch (of every epoch with `every`), or
    what was checked, in a few words."""
    current = current_epoch(folder)
    index: Index | None = None
    try:
        index = loads(Index, (folder / INDEX).read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, DecodeError) as exc:
        return Problem(folder / INDEX, 0, f"not an index: {exc}")
    checked: list[Log] = []
    for epoch in range(current + 1) if every else [current]:
        path = folder / log_name(epoch)
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
        checked.append(log)
    log = checked[-1]
    turns = len(turns_of(log.records, baseline=baseline))
    before = f"epoch {current}, {current} before it{' checked too' if every else ''}: "
    chained = "chain whole" if log.chained_from == 0 else (
        f"written before the chain up to line {log.chained_from}"
    )  # fmt: skip
    notes = "" if index is not None else "; no index.json to compare its end with"
    if isinstance(log.records[-1], EpochEndRecord):
        notes += "; a new epoch was decided and is opened when loopd next resumes the session"
    return f"{before if current else ''}{turns} turns, {len(log.records)} records, {chained}{notes}"


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
    first = 3 if len(new) > 2 and isinstance(new[2], SummaryRecord) else 2
    carried = list(new[first : head.own_from])
    if carried and list(old[len(old) - 1 - len(carried) : -1]) != carried:
        line = first + 1
        return Problem(path, line, "the turns carried are not the ones the last epoch ended with")
    return None
