"""`bxctl chat`: the command-line channel to loopd (SPEC section 9, issue 18).

    bxctl chat [--socket PATH] [--session ID [--new] | -c] [--no-thinking] [--say TEXT]
               [--json[=lines]] [--new-epoch]
    bxctl sessions | show ID | verify [ID...] | rm ID     (cli/sessions.py)

Interactive by default: on a terminal, a line editor (history, a paste or a `\"\"\"` block is
one message, `/help` and the other commands answered by bxctl); piped, one turn per line.
`--say` runs one turn, streamed on a terminal, the answer alone into a pipe. `--json` prints
every frame as one JSON line and nothing else on stdout. The exit code says how it ended
(`commands.py`). Nothing is printed about the session before loopd is known to listen.
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import secrets
import shutil
import sys
import textwrap
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import trio

from .. import __version__
from ..config import DEFAULT_HOME
from ..proto import InvalidValue, SessionId
from .chat import Chat, Failed, Mode, Reader, Steer, interactive, say
from .commands import EXIT_CODES, EXIT_USAGE
from .jsonout import JsonOut
from .render import Renderer
from .sessions import COMMANDS as SESSION_COMMANDS
from .sessions import Output, entries, find, home_of, run_command, sessions
from .sessions import add_commands as add_session_commands
from .terminal import Keyboard, Screen

__all__ = ["build_parser", "default_socket", "main", "new_session_id", "run_chat"]

_LOOPD_CODES = ", ".join(f"{n} {code.value}" for code, n in EXIT_CODES.items())
EPILOG = (
    textwrap.fill(
        "exit codes: 0 done; 2 bad arguments; 3 no loopd on the socket; 4 the connection to "
        f"loopd was lost mid-turn; 5 the message is over the 1 MiB frame; loopd's errors: "
        f"{_LOOPD_CODES}; 1 an error code this bxctl does not know; 130 cancelled with Ctrl-C. "
        "Piped input: the code of the first turn that failed.",
        width=92,
    )
    + '\n\nin a chat: /help, /new, /stats, /quit; a paste or a """ block is one message;'
    + "\nwhile a turn runs, Enter queues what you type, Ctrl-C then Enter sends it instead."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bxctl", description="Talk to Boxmaker's loopd over its Unix socket."
    )
    parser.add_argument("--version", action="version", version=f"bxctl {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat = commands.add_parser(
        "chat",
        help="chat with the agent",
        description="Chat with the agent: a turn per message.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chat.add_argument(
        "--socket",
        type=Path,
        help="loopd's socket (default: $BOXMAKER_HOME/run/loop/loop.sock, "
        "else /var/lib/boxmaker/run/loop/loop.sock)",
    )
    chat.add_argument("--session", help="continue (or start) this session id (default: a new "
                      "one, chat-<date>-<time>-<random>)")  # fmt: skip
    chat.add_argument("--no-thinking", action="store_true", help="ask without thinking "
                      "(default: thinking on)")  # fmt: skip
    chat.add_argument("--say", metavar="TEXT", help="run one turn, print the answer, exit")
    chat.add_argument("--json", nargs="?", const="events", choices=["events", "lines"],
                      help="print every frame as a JSON line; =lines batches text by line "
                      "(default: one line per event)")  # fmt: skip
    chat.add_argument("-c", "--continue", dest="resume_last", action="store_true",
                      help="continue the most recent session")  # fmt: skip
    chat.add_argument("--new", action="store_true", help="with --session: start it if it is new")
    chat.add_argument("--home", type=Path, help="the home, to check --session and -c against "
                      "(default: $BOXMAKER_HOME, else /var/lib/boxmaker)")  # fmt: skip
    chat.add_argument("--new-epoch", action="store_true",
                      help="the first message opens a fresh epoch")  # fmt: skip
    add_session_commands(commands)
    return parser


def default_socket(environ: Mapping[str, str]) -> Path:
    home = Path(environ.get("BOXMAKER_HOME") or DEFAULT_HOME)
    return home / "run" / "loop" / "loop.sock"


def new_session_id(now: datetime | None = None) -> SessionId:
    """`chat-YYYYMMDD-HHMMSS-xxxx`: the time, then a random suffix."""
    moment = now or datetime.now(UTC)
    return SessionId(f"chat-{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}")


def _mode(args: argparse.Namespace, out: TextIO) -> Mode:
    if args.json:
        return "json"
    if args.say is not None and not out.isatty():
        return "answer"
    return "stream"


def _reader(mode: Mode, environ: Mapping[str, str]) -> tuple[Reader, bool]:
    """The line editor when a person types at a terminal (drawn on stdout, or on stderr when
    stdout is for `--json` or not a terminal), else lines from stdin; and whether a person."""
    from .editor import History, LineEditor, LineReader, history_path

    screen = sys.stdout if mode != "json" and sys.stdout.isatty() else sys.stderr
    if not (sys.stdin.isatty() and screen.isatty()):
        return LineReader(sys.stdin), False
    try:
        history: History | None = History(history_path(environ))
    except OSError as error:
        sys.stderr.write(f"bxctl: no history this time: {error}\n")
        history = None
    return LineEditor(history, stream=screen), True


class NoSession(Exception):
    """`--session` or `-c` names no session; the message says why and what to do."""


def chosen_session(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The id `--session` or `-c` names, checked against the home. A new id needs `--new`; no
    option at all starts a new session.

    Raises:
        NoSession: there is no such session (the message names the closest).
    """
    home = home_of(args.home, environ)
    if args.resume_last:
        listed = entries(home)
        if not listed:
            raise NoSession(f"no session to continue in {home / 'sessions'}")
        return listed[0].id
    if args.session is None or args.new or not (home / "sessions").is_dir():
        return str(args.session or new_session_id())
    if (home / "sessions" / args.session).is_dir():
        return str(args.session)
    folder = find(home, args.session)
    if isinstance(folder, str):
        raise NoSession(f"{folder} (start a new session with this id with --new)")
    return folder.name


async def run_chat(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    out, err = sys.stdout, sys.stderr
    mode = _mode(args, out)
    json = JsonOut("lines" if args.json == "lines" else "events")
    try:
        session = SessionId(chosen_session(args, environ))
    except (InvalidValue, NoSession) as error:
        if mode == "json":
            out.write(json.error("bad_argument", str(error)))
        else:
            err.write(f"error: {error}\n")
        return EXIT_USAGE
    tty = out.isatty() and mode != "json"
    screens = (Screen(out), Screen(err))  # held while a steering line is up
    renderer = Renderer(
        tty=tty,
        color=tty and "NO_COLOR" not in environ,
        width=shutil.get_terminal_size().columns,
        unicode=(out.encoding or "").lower().replace("-", "") == "utf8",
    )
    resume = args.session is not None or args.resume_last
    chat = Chat(args.socket or default_socket(environ), session, resume=resume,
                thinking=not args.no_thinking, mode=mode, out=screens[0], err=screens[1],
                renderer=renderer, json=json)  # fmt: skip
    try:
        await chat.probe()
    except Failed as failure:
        return chat.fail(failure)
    chat.new_epoch = args.new_epoch
    chat.announce()
    if args.say is not None:
        return await say(chat, args.say)
    reader, person = _reader(mode, environ)
    home = home_of(args.home, environ)

    def listing() -> str:
        buffer = io.StringIO()
        now = datetime.now(UTC)
        sessions(home, Output(buffer, buffer, color=renderer.color), as_json=False, now=now)
        return buffer.getvalue().rstrip("\n")

    steer = _steer(reader, screens) if tty and person else None
    code = await interactive(chat, reader, new_session_id, listing, steer)
    return 0 if person else code


def _steer(reader: Reader, screens: tuple[Screen, Screen]) -> Steer | None:
    """What is typed while a turn runs steers it: for a person at the line editor, with the
    turn's text on the same terminal (issue 19)."""
    from .editor import LineEditor
    from .steer import steered

    if not isinstance(reader, LineEditor):
        return None
    keyboard = Keyboard(sys.stdin.fileno())
    return functools.partial(steered, editor=reader, keyboard=keyboard, screens=screens)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in SESSION_COMMANDS:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        output = Output(sys.stdout, sys.stderr, color)
        return run_command(args, os.environ, output, sys.stdin)
    if args.command != "chat":
        parser.print_help()
        return EXIT_USAGE
    try:
        return trio.run(run_chat, args, os.environ)
    except KeyboardInterrupt:  # before the signal receiver was in place
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
