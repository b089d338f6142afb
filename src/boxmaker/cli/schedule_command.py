"""`bxctl schedule`: the owner's schedules, read and written straight in
`<home>/schedules.jsonl` as `bxctl memory` does the notes (no daemon is needed; loopd sees a
change within a second).

    bxctl schedule add WHEN MESSAGE (--session S | --new-session) [--tz Z] [--catch-up once|skip]
    bxctl schedule ls [--all] [--json]    each one's next time and last outcome
    bxctl schedule rm ID | pause ID | resume ID

Each write appends under the file's lock, the one loopd and brokerd take. `--config` gives
the bounds (`[schedules]`) and the default zone; without it the defaults hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import SchedulesConfig
from ..proto import (
    CatchUp,
    CreatedBy,
    ScheduleRecord,
    SchedulesRecord,
    SessionId,
    Timestamp,
    encode,
    unstructure,
)
from ..session import SessionError
from .sessions import Output, home_of
from .table import DIM, align, style

if TYPE_CHECKING:
    from ..schedules import Book

__all__ = ["COMMAND", "add_command", "run_schedule", "schedule_lines", "schedules_listing"]

COMMAND = "schedule"
SHOWN = 50  # characters of a message in the listing


def schedule_lines(book: Book, now: datetime, *, every: bool = False) -> list[str]:
    """The schedules as `bxctl schedule ls` (and the chat's `/schedules`) lists them, their
    words with every control character escaped (the agent's message is the model's)."""
    from ..schedules import next_shown
    from .render import escape_controls

    rows = [["ID", "WHEN", "TZ", "SESSION", "NEXT", "LAST", "MESSAGE"]]
    for entry in book.entries.values():
        if not (every or not entry.finished(now)):
            continue
        record, last = entry.record, entry.last
        text = escape_controls(" ".join(record.message.split()))
        rows.append(
            [
                record.id,
                record.when,
                record.tz,
                str(record.session) if record.session else "(new each time)",
                next_shown(entry, now),
                f"{last.outcome.value} {str(last.due)[:16]}" if last is not None else "-",
                (text[:SHOWN] + "...") if len(text) > SHOWN else text,
            ]
        )
    return align(rows) if len(rows) > 1 else []


def schedules_listing(home: Path) -> str:
    """What the chat's `/schedules` shows: the live schedules, or why there are none to show."""
    from ..schedules import Book, schedules_file

    file = schedules_file(home)
    try:
        lines = schedule_lines(Book(file.read()), datetime.now(UTC))
    except SessionError as error:
        return f"[the schedules cannot be read: {error}]"
    return "\n".join(lines) if lines else f"[no schedules in {file.path}]"


def _session_identity(home: Path, name: str) -> tuple[SessionId, str] | str:
    from .. import layout
    from ..proto import InvalidValue
    from ..store import identity_of

    try:
        sid = SessionId(name)
    except InvalidValue as error:
        return str(error)
    identity = identity_of(layout.session_folder(home, name))
    if not identity:
        return f"there is no session {name} in {layout.sessions_folder(home)}"
    return sid, identity


def _add(args: Any, home: Path, bounds: SchedulesConfig, out: Output) -> int:
    from ..schedules import Wanted, machine_zone, made, schedules_file

    session, identity = None, ""
    if args.session is not None:
        found = _session_identity(home, args.session)
        if isinstance(found, str):
            out.err.write(f"error: {found}\n")
            return 1
        session, identity = found
    wanted = Wanted(
        args.when,
        args.tz or bounds.tz or machine_zone(),
        args.message,
        CreatedBy.OWNER,
        session,
        identity,
        new_session=args.new_session,
        catch_up=CatchUp(args.catch_up),
    )
    now = Timestamp(datetime.now(UTC))
    record = schedules_file(home).append(lambda held: made(_book(held), wanted, now, bounds))
    if isinstance(record, str):
        out.err.write(f"error: {record}\n")
        return 1
    assert isinstance(record, ScheduleRecord)
    out.out.write(f"scheduled {record.id}: {record.when} ({record.tz})\n")
    return 0


def _book(records: Any) -> Book:
    from ..schedules import Book

    return Book(records)


def _change(args: Any, home: Path, out: Output) -> int:
    from ..schedules import cancelled, paused, resumed, schedules_file

    now = Timestamp(datetime.now(UTC))

    def decide(held: Any) -> SchedulesRecord | str:
        book = _book(held)
        if args.action == "rm":
            return cancelled(book, args.id, now)
        return paused(book, args.id, now) if args.action == "pause" else resumed(book, args.id, now)

    record = schedules_file(home).append(decide)
    if isinstance(record, str):
        out.err.write(f"error: {record}\n")
        return 1
    done = {"rm": "cancelled", "pause": "paused", "resume": "resumed"}[args.action]
    out.out.write(f"{done} {args.id}\n")
    return 0


def _listing(home: Path, out: Output, *, every: bool, as_json: bool) -> int:
    from ..schedules import Book, schedules_file

    file = schedules_file(home)
    records = file.read()
    if as_json:
        for record in records:
            out.out.write(encode(unstructure(record)).decode() + "\n")
        return 0
    lines = schedule_lines(Book(records), datetime.now(UTC), every=every)
    if not lines:
        out.err.write(f"no schedules in {file.path}\n")
        return 0
    header, *rest = lines
    out.out.write(style(header, DIM, out.color) + "\n" + "".join(line + "\n" for line in rest))
    return 0


def _bounds(path: Path | None) -> SchedulesConfig | str:
    if path is None:
        return SchedulesConfig()
    from ..config import ConfigError, load_config

    try:
        return load_config(path).schedules
    except (ConfigError, OSError) as error:
        return str(error)


def run_schedule(args: Any, environ: Mapping[str, str], out: Output) -> int:
    """Run `bxctl schedule ...`; the exit status."""
    home = home_of(args.home, environ)
    try:
        if args.action == "ls":
            return _listing(home, out, every=args.all, as_json=args.json)
        if args.action != "add":
            return _change(args, home, out)
        bounds = _bounds(args.config)
        if isinstance(bounds, str):
            out.err.write(f"error: {bounds}\n")
            return 1
        return _add(args, home, bounds, out)
    except SessionError as error:  # a damaged file, one another user could write, ...
        out.err.write(f"error: {error}\n")
        return 1


def add_command(commands: Any) -> None:
    """`bxctl schedule`, on bxctl's sub-command parser."""
    schedule = commands.add_parser(
        "schedule", help="turns that run at their time (cron, at, in, every)"
    )
    actions = schedule.add_subparsers(dest="action", metavar="ACTION", required=True)
    added = actions.add_parser(
        "add",
        help="schedule a message",
        description="Schedule MESSAGE into a session at WHEN: 'cron 0 7 * * *' (or the five "
        "fields alone), 'at 2026-12-07T09:00', 'in 20m', 'every 2h'.",
    )
    added.add_argument("when", help="cron M H DoM Mon DoW | at TIME | in DURATION | every DURATION")
    added.add_argument("message", help="what the agent is told at that time")
    where = added.add_mutually_exclusive_group(required=True)
    where.add_argument("--session", help="the session its turns run in (it must exist)")
    where.add_argument(
        "--new-session", action="store_true", help="each firing in a session of its own"
    )
    added.add_argument("--tz", help="the IANA zone WHEN is read in (default: the machine's)")
    added.add_argument(
        "--catch-up",
        choices=[c.value for c in CatchUp],
        default=CatchUp.ONCE.value,
        help="after loopd was down: fire once for what fell due (default), or skip it",
    )
    added.add_argument("--config", type=Path, help="config.toml, for [schedules]' bounds")
    listed = actions.add_parser("ls", help="list the schedules, each one's next time")
    listed.add_argument("--all", action="store_true", help="cancelled and finished ones too")
    listed.add_argument("--json", action="store_true", help="every line of the file")
    changed = []
    for name, said in (("rm", "cancel"), ("pause", "pause"), ("resume", "resume")):
        parser = actions.add_parser(name, help=f"{said} a schedule")
        parser.add_argument("id", help="the schedule's id, such as s3")
        changed.append(parser)
    for parser in (added, listed, *changed):
        parser.add_argument(
            "--home", type=Path, help="the home (default: $BOXMAKER_HOME, else /var/lib/boxmaker)"
        )
