"""`bxctl fork SESSION --at TURN [--new ID]` and the chat's `/fork [TURN]`: a new session whose
log is the first turns of another (SPEC section 20; `store.fork_session` makes it, straight on
disk as `bxctl rm` removes: no loopd is needed and none is disturbed)."""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..proto import InvalidValue, SessionId
from ..session import SessionError
from ..store import fork_session
from .commands import EXIT_USAGE
from .sessions import Output, find, home_of

__all__ = ["COMMAND", "add_command", "chat_fork", "fork_id", "run_fork"]

COMMAND = "fork"


def add_command(commands: Any) -> None:
    forking = commands.add_parser(
        COMMAND,
        help="start a new session from the first turns of another",
        description="Make a new session whose conversation is the first TURN turns of "
        "SESSION, as they were: its first request goes on from the same bytes, so the "
        "server may still hold them. The workspace and the interpreter are not taken back "
        "to that turn; the fork's first turn tells the model so.",
    )
    forking.add_argument("session", help="the session to fork (its id, or its start or end)")
    forking.add_argument("--at", type=int, required=True, metavar="TURN", help="turns kept")
    forking.add_argument(
        "--new", metavar="ID", help="the fork's id (default: fork-<time>-<random>)"
    )
    forking.add_argument("--home", type=Path, help="the home (default: $BOXMAKER_HOME, else "
                         "/var/lib/boxmaker)")  # fmt: skip
    forking.add_argument("--json", action="store_true", help="say what was made as JSON")


def fork_id(now: datetime | None = None) -> SessionId:
    """`fork-YYYYMMDD-HHMMSS-xxxx`, as a new chat's id."""
    moment = now or datetime.now(UTC)
    return SessionId(f"fork-{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}")


def run_fork(args: argparse.Namespace, environ: Mapping[str, str], out: Output) -> int:
    home = home_of(args.home, environ)
    found = find(home, args.session)
    if isinstance(found, str):
        out.err.write(f"error: {found}\n")
        return EXIT_USAGE
    try:
        new = SessionId(args.new) if args.new else fork_id()
        forked = fork_session(home, SessionId(found.name), args.at, new)
    except (SessionError, InvalidValue) as error:
        out.err.write(f"error: {error}\n")
        return EXIT_USAGE
    if args.json:
        out.out.write(json.dumps({"session": new.value, "from": found.name, "turns": args.at,
                                  "epoch": forked.epoch}) + "\n")  # fmt: skip
    else:
        out.out.write(
            f"forked {found.name} at turn {args.at} as {new.value}; go on with: "
            f"bxctl chat --session {new.value}\n"
        )
    return 0


def chat_fork(home: Path, session: SessionId, rest: str) -> SessionId | str:
    """The chat's `/fork [TURN]`: the fork made (of every turn, or the first TURN), or what
    went wrong, in words."""
    words = rest.split()
    if len(words) > 1 or (words and not words[0].isdigit()):
        return "/fork takes a turn's number, or nothing for every turn"
    try:
        forked = fork_session(home, session, int(words[0]) if words else None, fork_id())
    except (SessionError, InvalidValue) as error:
        return f"no fork: {error}"
    return forked.session
