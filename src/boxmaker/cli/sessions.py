"""`bxctl sessions`, `show`, `verify` and `rm`: the sessions of a home, read straight from
their files through `store.offline` (no loopd is needed and none is disturbed), and written
for a person or a script."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from attrs import frozen

from .. import layout
from ..config import DEFAULT_HOME
from ..proto import SessionId, encode, unstructure
from ..session import Problem, SessionError, TornLog
from ..store import (
    InTurn,
    check_epochs,
    entries,
    epoch_views,
    held_for_removal,
    identity_of,
    remove_session,
)
from ..store import session_folders as folders
from .conversation import as_json, conversation, markdown, stats
from .table import BOLD, DIM, ago, align, resolve, shorten, style

__all__ = [
    "COMMANDS",
    "Output",
    "add_commands",
    "find",
    "home_of",
    "remove",
    "run_command",
    "sessions",
    "show",
    "verify",
]


@frozen
class Output:
    """Where a command writes, and whether it may use colour."""

    out: TextIO
    err: TextIO
    color: bool = False


def sessions(home: Path, out: Output, *, as_json: bool, now: datetime) -> int:
    listed = entries(home)
    if as_json:
        for item in listed:
            value = (
                unstructure(item.index)
                if item.index
                else {"session": item.id, "created": _iso(item.created), "first": item.first}
            )
            out.out.write(encode(value).decode() + "\n")
        return 0
    if not listed:
        out.err.write(f"no sessions in {layout.sessions_folder(home)}\n")
        return 0
    shown = shorten([e.id for e in listed])
    rows = [["ID", "CREATED", "LAST TURN", "TURNS", "TOKENS", "FIRST MESSAGE"]]
    for item in listed:
        index = item.index
        rows.append(
            [
                shown[item.id],
                ago(item.created, now),
                ago(item.last_turn, now),
                f"{index.turns:,}" if index else "-",
                f"{index.tokens:,}" if index else "-",
                item.first,
            ]
        )
    header, *lines = align(rows, right=(3, 4))
    out.out.write(style(header, DIM, out.color) + "\n")
    out.out.write("".join(line + "\n" for line in lines))
    return 0


def _iso(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if moment else None


def find(home: Path, given: str) -> Path | str:
    """The folder of the session `given` names (whole, or its start or end), else a sentence
    saying why there is none."""
    ids = [folder.name for folder in folders(home)]
    found = resolve(given, ids)
    if len(found) == 1:
        return layout.session_folder(home, found[0])
    if found:
        return f"{given!r} names {len(found)} sessions: {', '.join(sorted(found))}"
    return f"no session {given!r} in {layout.sessions_folder(home)}{closest(given, ids)}"


def closest(given: str, ids: Sequence[str]) -> str:
    """`; did you mean a or b?` for the ids nearest `given`, or nothing."""
    near = difflib.get_close_matches(given, ids, n=3, cutoff=0.5)
    return f"; did you mean {' or '.join(near)}?" if near else ""


def show(folder: Path, out: Output, *, mode: str, every: bool = False) -> int:
    """The current epoch's conversation (every epoch's with `every`), or its figures."""
    try:
        views = epoch_views(folder, every=every)
    except OSError as exc:
        out.err.write(f"error: cannot read {folder}: {exc.strerror or exc}\n")
        return 1
    except TornLog as error:
        out.err.write(f"error: {error}; `bxctl verify {folder.name}` says more\n")
        return 1
    if mode == "json":
        out.out.write(encode(as_json(folder.name, views, every=every)).decode() + "\n")
        return 0
    lines = (
        markdown(folder.name, views, every=every)
        if mode == "markdown"
        else stats(views, every=every)
        if mode == "stats"
        else conversation(views, out.color, every=every)
    )
    out.out.write("".join(f"{line}\n" for line in lines))
    return 0


def verify(home: Path, given: Sequence[str], out: Output, *, every: bool = False) -> int:
    """Check each session named (every one when none is): its current epoch's log, every
    epoch's with `every`; the first problem of each, exit 1 if any."""
    if given:
        found = [find(home, name) for name in given]
        for unknown in (f for f in found if isinstance(f, str)):
            out.err.write(f"error: {unknown}\n")
        if any(isinstance(f, str) for f in found):
            return 1
        chosen = [folder for folder in found if isinstance(folder, Path)]
    else:
        chosen = sorted(folders(home))
    bad = 0
    for folder in chosen:
        problem = check_epochs(folder, every=every)
        if isinstance(problem, Problem):
            bad += 1
            out.out.write(f"{style('FAIL', BOLD, out.color)} {folder.name}: {problem}\n")
        else:
            out.out.write(f"ok   {folder.name}: {problem}\n")
    if not chosen:
        out.err.write(f"no sessions in {layout.sessions_folder(home)}\n")
    if not given:
        bad += _verify_schedules(home, out)
    return 1 if bad else 0


def _verify_schedules(home: Path, out: Output) -> int:
    """Check `schedules.jsonl` (when there is one) as a log is checked: 1 if it fails."""
    from ..schedules import schedules_file

    file = schedules_file(home)
    if not file.path.exists():
        return 0
    try:
        records = file.read()
    except SessionError as error:
        out.out.write(f"{style('FAIL', BOLD, out.color)} {file.path.name}: {error}\n")
        return 1
    out.out.write(f"ok   {file.path.name}: {len(records)} records, chained\n")
    return 0


def remove(folder: Path, out: Output, *, ask: bool, answer: TextIO) -> int:
    """Remove a session, unless loopd is in a turn on it (it holds its current log's lock
    then)."""
    try:
        with held_for_removal(folder):
            if ask:
                out.err.write(f"remove session {folder.name} and all its turns? [y/N] ")
                out.err.flush()
                if answer.readline().strip().lower() not in ("y", "yes"):
                    out.err.write("not removed\n")
                    return 1
            remove_session(folder)
    except InTurn as error:
        out.err.write(f"error: {error}\n")
        return 1
    except OSError as exc:
        out.err.write(f"error: cannot remove {folder}: {exc.strerror or exc}\n")
        return 1
    out.out.write(f"removed {folder.name}\n")
    return 0


def tell_brokerd(socket: Path, session: str, identity: str, out: Output) -> None:
    """Tell brokerd the session (`identity`) is gone, so that its interpreter and its grants
    end now. A brokerd that cannot be told holds them for the removed session alone (its
    identity): a new session of this id gets none of them."""
    import trio  # only here: bxctl lists and shows sessions without it

    from ..serving import BrokerDown, BrokerPort

    try:
        trio.run(BrokerPort(socket, 10.0).session_removed, SessionId(session), identity)
    except BrokerDown as error:
        out.err.write(
            f"note: brokerd was not told ({error}); what it kept for {session} "
            "holds for the removed session alone, never a new one of this id\n"
        )


# --- the command line ----------------------------------------------------------------------

COMMANDS = ("sessions", "show", "verify", "rm")


def home_of(given: Path | None, environ: Mapping[str, str]) -> Path:
    """`--home`, else `$BOXMAKER_HOME`, else the default home."""
    return given or Path(environ.get("BOXMAKER_HOME") or DEFAULT_HOME)


def add_commands(commands: Any) -> None:
    """The session commands, on `bxctl`'s sub-command parser."""
    home = {"type": Path, "help": "the home (default: $BOXMAKER_HOME, else /var/lib/boxmaker)"}
    listing = commands.add_parser("sessions", help="list the sessions, the most recent first")
    listing.add_argument("--home", **home)
    listing.add_argument("--json", action="store_true", help="one JSON object a session")
    shown = commands.add_parser("show", help="show a session's conversation or its figures")
    shown.add_argument("session", help="the session's id (or its start, or its end)")
    shown.add_argument("--home", **home)
    shown.add_argument("--all", action="store_true", help="every epoch (default: the current)")
    kind = shown.add_mutually_exclusive_group()
    kind.add_argument("--stats", action="store_true", help="a table of each turn's figures")
    kind.add_argument("--json", action="store_true", help="the conversation as JSON")
    kind.add_argument("--markdown", action="store_true", help="the conversation as Markdown")
    checked = commands.add_parser("verify", help="check logs: lines, hash chain, order, end")
    checked.add_argument("sessions", nargs="*", help="ids (default: every session)")
    checked.add_argument("--home", **home)
    checked.add_argument("--all", action="store_true", help="every epoch (default: the current)")
    removed = commands.add_parser("rm", help="remove a session (not while it is in a turn)")
    removed.add_argument("session", help="the session's id (or its start, or its end)")
    removed.add_argument("--home", **home)
    removed.add_argument("-y", "--yes", action="store_true", help="do not ask")
    removed.add_argument(
        "--socket",
        type=Path,
        help="brokerd's socket, told of the removal "
        "(default: $BOXMAKER_HOME/run/broker/broker.sock)",
    )


def run_command(args: Any, environ: Mapping[str, str], out: Output, answer: TextIO) -> int:
    """Run `bxctl sessions|show|verify|rm`; the exit status."""
    home = home_of(args.home, environ)
    now = datetime.now(UTC)
    if args.command == "sessions":
        return sessions(home, out, as_json=args.json, now=now)
    if args.command == "verify":
        return verify(home, args.sessions, out, every=args.all)
    folder = find(home, args.session)
    if isinstance(folder, str):
        out.err.write(f"error: {folder}\n")
        return 1
    if args.command == "rm":
        identity = identity_of(folder)  # which session this is: a new one may take the id
        status = remove(folder, out, ask=not args.yes, answer=answer)
        if status == 0:
            tell_brokerd(args.socket or layout.broker_socket(home), folder.name, identity, out)
        return status
    mode = "stats" if args.stats else "json" if args.json else "markdown" if args.markdown else ""
    return show(folder, out, mode=mode, every=args.all)
