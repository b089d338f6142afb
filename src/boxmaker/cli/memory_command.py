"""`bxctl memory`: the owner's view of memory, read straight from `<home>/memory/` as
`bxctl sessions` reads the sessions (no daemon is needed).

    bxctl memory ls [--all] [--json]     the notes (--all: withdrawn ones too)
    bxctl memory show ID                 one note whole, and where it came from
    bxctl memory add TEXT [--pin]        keep a note (the owner's own)
    bxctl memory rm ID                   withdraw a note (its line stays)
    bxctl memory search QUERY [--limit N]   what recall finds, in the notes and every session
    bxctl memory reindex                 rebuild the recall index from nothing

`add` and `rm` append under the notes file's lock, the one brokerd takes for `remember` and
`forget`, so nothing races; `search` brings the recall index up to date first (as brokerd
does, under SQLite's own locks); `reindex` makes it again from the files. The memory package
(SQLite, the index) is imported when a memory command runs, not when bxctl starts.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..proto import ForgetRecord, NoteRecord, Timestamp, encode, unstructure
from ..session import SessionError
from .sessions import Output, home_of
from .table import DIM, align, style

if TYPE_CHECKING:
    from ..memory import Notes, NotesFile, RecallIndex

__all__ = ["COMMAND", "add_command", "memory_lines", "memory_listing", "run_memory"]

COMMAND = "memory"
SHOWN = 70  # characters of a note's text in the listing


def memory_lines(notes: Notes, *, every: bool = False) -> list[str]:
    """The notes as `bxctl memory ls` (and the chat's `/memory`) lists them: id, date, pinned
    and where each came from, then its first words; withdrawn ones only with `every`."""
    withdrawn_at = {r.id: r for r in notes.records if isinstance(r, ForgetRecord)}
    rows = [["ID", "MADE", "PIN", "FROM", "NOTE"]]
    for record in notes.records:
        if not isinstance(record, NoteRecord):
            continue
        gone = withdrawn_at.get(record.id)
        if gone is not None and not every:
            continue
        text = " ".join(record.text.split())
        text = text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"
        if gone is not None:
            text = f"(withdrawn {str(gone.time)[:10]}) {text}"
        rows.append(
            [record.id, str(record.time)[:10], "pin" if record.pin else "", _origin(record), text]
        )
    if len(rows) == 1:
        return []
    return align(rows)


def memory_listing(home: Path) -> str:
    """What the chat's `/memory` shows: the notes, or why there are none to show."""
    from ..memory import NotesFile

    notes = NotesFile(home)
    try:
        lines = memory_lines(notes.read())
    except SessionError as error:
        return f"[the notes cannot be read: {error}]"
    return "\n".join(lines) if lines else f"[no notes in {notes.path}]"


def _origin(note: NoteRecord) -> str:
    if note.session is None:
        return "you"
    said = f"{note.session}, turn {note.turn}"
    return said + (" (a tool's words)" if note.untrusted else "")


def _listing(notes_file: NotesFile, out: Output, *, every: bool, as_json: bool) -> int:
    notes = notes_file.read()
    if as_json:
        for record in notes.records:
            out.out.write(encode(unstructure(record)).decode() + "\n")
        return 0
    lines = memory_lines(notes, every=every)
    if not lines:
        out.err.write(f"no notes in {notes_file.path}\n")
        return 0
    header, *rest = lines
    out.out.write(style(header, DIM, out.color) + "\n" + "".join(line + "\n" for line in rest))
    return 0


def _show(notes_file: NotesFile, id: str, out: Output) -> int:
    notes = notes_file.read()
    note = notes.made(id)
    if note is None:
        out.err.write(f"error: there is no note {id} in {notes_file.path}\n")
        return 1
    gone = next((r for r in notes.records if isinstance(r, ForgetRecord) and r.id == id), None)
    said = [
        f"{note.id}, made {note.time}" + (", pinned" if note.pin else ""),
        f"from {_origin(note)}",
    ]
    if gone is not None:
        by = "you" if gone.session is None else f"{gone.session}, turn {gone.turn}"
        said.append(f"withdrawn {gone.time} by {by}")
    out.out.write("\n".join([*said, "", note.text]) + "\n")
    return 0


def _search(index: RecallIndex, query: str, most: int, out: Output) -> int:
    from ..memory import query_words, recalled

    index.update()
    words = query_words(query)
    found = index.search(words, most)
    said = recalled(" ".join(found.words), found.hits, budget=1_000_000)
    out.out.write((said.text or f'nothing in memory matches "{" ".join(words)}"') + "\n")
    return 0


def _reindex(index: RecallIndex, out: Output) -> int:
    start = time.perf_counter()
    done = index.rebuild()
    seconds = time.perf_counter() - start
    counts = index.counts()
    passages = sum(n for kind, n in counts.items() if kind != "sources")
    out.out.write(
        f"rebuilt {index.path} in {seconds:.2f} s: {passages:,} passages from "
        f"{counts.get('sources', 0):,} files\n"
    )
    for problem in done.problems:
        out.err.write(f"warning: {problem}\n")
    return 0


def run_memory(args: Any, environ: Mapping[str, str], out: Output) -> int:
    """Run `bxctl memory ...`; the exit status."""
    from ..memory import NotesFile, RecallIndex, remembered, withdrawn

    home = home_of(args.home, environ)
    notes = NotesFile(home)
    now = Timestamp(datetime.now(UTC))
    try:
        match args.action:
            case "ls":
                return _listing(notes, out, every=args.all, as_json=args.json)
            case "show":
                return _show(notes, args.id, out)
            case "add":
                made = notes.append(lambda held: remembered(held, args.text, args.pin, now))
                return _said(made, out, "kept as {}" + (" (pinned)" if args.pin else ""))
            case "rm":
                made = notes.append(lambda held: withdrawn(held, args.id, now))
                return _said(made, out, "withdrew {}")
            case "search":
                return _search(RecallIndex(home), args.query, args.limit, out)
            case _:
                return _reindex(RecallIndex(home), out)
    except SessionError as error:  # damaged notes, a file another user could write, ...
        out.err.write(f"error: {error}\n")
        return 1


def _said(made: NoteRecord | ForgetRecord | str, out: Output, done: str) -> int:
    if isinstance(made, str):
        out.err.write(f"error: {made}\n")
        return 1
    out.out.write(done.format(made.id) + "\n")
    return 0


def _limit(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= 100:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to 100, got {text!r}")
    return number


def add_command(commands: Any) -> None:
    """`bxctl memory`, on bxctl's sub-command parser."""
    memory = commands.add_parser("memory", help="the notes, and recall over every session")
    actions = memory.add_subparsers(dest="action", metavar="ACTION", required=True)
    listed = actions.add_parser("ls", help="list the notes")
    listed.add_argument("--all", action="store_true", help="withdrawn notes too")
    listed.add_argument("--json", action="store_true", help="every line of the notes file")
    shown = actions.add_parser("show", help="show a note whole, and where it came from")
    shown.add_argument("id", help="the note's id, such as n12")
    added = actions.add_parser("add", help="keep a note")
    added.add_argument("text", help="the note")
    added.add_argument(
        "--pin", action="store_true", help="pin it: every new session and epoch holds it"
    )
    removed = actions.add_parser("rm", help="withdraw a note")
    removed.add_argument("id", help="the note's id, such as n12")
    searched = actions.add_parser("search", help="search the notes and every session")
    searched.add_argument("query", help="words to look for")
    searched.add_argument(
        "--limit", type=_limit, default=10, help="most passages, 1 to 100 (default 10)"
    )
    reindexed = actions.add_parser("reindex", help="rebuild the recall index from the files")
    for parser in (listed, shown, added, removed, searched, reindexed):
        parser.add_argument(
            "--home", type=Path, help="the home (default: $BOXMAKER_HOME, else /var/lib/boxmaker)"
        )
