"""`bxctl chat`: the command-line channel to loopd (SPEC section 9).

    bxctl chat [--socket PATH] [--session ID [--new] | -c] [--no-thinking] [--say TEXT]
               [--json[=lines]] [--new-epoch]
    bxctl sessions | show ID | verify [ID...] | rm ID     (cli/sessions.py)
    bxctl watch SESSION... [--yes] [--json]              (cli/watch.py)
    bxctl tools | approvals [ID ANSWER] | stop SESSION   (cli/owner.py)
    bxctl memory ls | show ID | add TEXT | rm ID | search QUERY | reindex   (cli/memory_command.py)
    bxctl schedule add WHEN MESSAGE | ls | rm ID | pause ID | resume ID  (cli/schedule_command.py)
    bxctl gateway [--json]                   gatewayd's status and rooms (cli/gateway_command.py)
    bxctl replay SESSION | --all ...         loopd's replay (cli/replay_command.py)
    bxctl fork SESSION --at TURN [--new ID]  a session of its first turns (cli/fork_command.py)
    bxctl undo SESSION [--turn N | --call C] [--force]  take back changes (cli/undo_command.py)

Interactive by default: on a terminal, a line editor (history, a paste or a `\"\"\"` block is
one message, `/help` and the other commands answered by bxctl); piped, one turn per line.
`--say` runs one turn, streamed on a terminal, the answer alone into a pipe. `--json` prints
every frame as one JSON line and nothing else on stdout. The exit code says how it ended
(`commands.py`). Nothing is printed about the session before loopd is known to listen.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

from ..version import VersionAction
from .commands import EXIT_CODES, EXIT_USAGE
from .fork_command import COMMAND as FORK_COMMAND
from .fork_command import add_command as add_fork_command
from .fork_command import run_fork
from .gateway_command import COMMAND as GATEWAY_COMMAND
from .gateway_command import add_command as add_gateway_command
from .gateway_command import run_gateway
from .memory_command import COMMAND as MEMORY_COMMAND
from .memory_command import add_command as add_memory_command
from .memory_command import run_memory
from .owner import COMMANDS as OWNER_COMMANDS
from .owner import add_commands as add_owner_commands
from .owner import run_owner_command
from .replay_command import COMMAND as REPLAY_COMMAND
from .replay_command import add_command as add_replay_command
from .replay_command import run_replay
from .schedule_command import COMMAND as SCHEDULE_COMMAND
from .schedule_command import add_command as add_schedule_command
from .schedule_command import run_schedule
from .sessions import COMMANDS as SESSION_COMMANDS
from .sessions import Output, run_command
from .sessions import add_commands as add_session_commands
from .undo_command import COMMAND as UNDO_COMMAND
from .undo_command import add_command as add_undo_command

__all__ = ["build_parser", "main"]

_LOOPD_CODES = ", ".join(f"{n} {code.value}" for code, n in EXIT_CODES.items())
EPILOG = (
    textwrap.fill(
        "exit codes: 0 done; 2 bad arguments; 3 no loopd on the socket; 4 the connection to "
        f"loopd was lost mid-turn; 5 the message is over the 1 MiB frame; loopd's errors: "
        f"{_LOOPD_CODES}; 1 an error code this bxctl does not know; 130 cancelled with Ctrl-C. "
        "Piped input: the code of the first turn that failed.",
        width=92,
    )
    + "\n\nin a chat: /help, /new, /fork, /undo, /rewind, /mode, /plan, /stats, /memory,"
    + " /schedules, /quit;"
    + ' a paste or a """ block is one message;'
    + "\nwhile a turn runs, Enter queues what you type, Ctrl-C then Enter sends it instead."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bxctl", description="Talk to Boxmaker's loopd over its Unix socket."
    )
    parser.add_argument("--version", action=VersionAction)
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
    chat.add_argument(
        "--session",
        help="continue (or start) this session id (default: a new "
        "one, chat-<date>-<time>-<random>)",
    )
    chat.add_argument(
        "--no-thinking", action="store_true", help="ask without thinking (default: thinking on)"
    )
    chat.add_argument("--say", metavar="TEXT", help="run one turn, print the answer, exit")
    chat.add_argument(
        "--json",
        nargs="?",
        const="events",
        choices=["events", "lines"],
        help="print every frame as a JSON line; =lines batches text by line "
        "(default: one line per event)",
    )
    chat.add_argument(
        "-c",
        "--continue",
        dest="resume_last",
        action="store_true",
        help="continue the most recent session",
    )
    chat.add_argument("--new", action="store_true", help="with --session: start it if it is new")
    chat.add_argument(
        "--attach",
        metavar="PATH",
        action="append",
        default=[],
        help="attach a file (a text, a PDF or an image) to the first message; repeatable",
    )
    chat.add_argument(
        "--mode",
        dest="session_mode",
        choices=["read-only", "ask", "auto"],
        help="set the session's mode: read-only (nothing written or run), ask (every write "
        "or run asked, once), auto (the policy decides)",
    )
    chat.add_argument(
        "--home",
        type=Path,
        help="the home, to check --session and -c against "
        "(default: $BOXMAKER_HOME, else /var/lib/boxmaker)",
    )
    chat.add_argument(
        "--new-epoch", action="store_true", help="the first message opens a fresh epoch"
    )
    chat.add_argument(
        "--yes",
        action="store_true",
        help="approve once each call that asks "
        "for the owner's approval (at a terminal you are asked)",
    )
    watching = commands.add_parser(
        "watch",
        help="show every turn of sessions as it runs, whoever started it",
        description="Show every turn of these sessions as it streams, whoever started it "
        "(another terminal, the gateway, a schedule), until loopd stops or Ctrl-C. At a "
        "terminal, a turn whose channel left asks you its questions.",
    )
    watching.add_argument("sessions", nargs="+", metavar="SESSION")
    watching.add_argument(
        "--socket", type=Path, help="loopd's socket (default: $BOXMAKER_HOME/run/loop/loop.sock)"
    )
    watching.add_argument("--json", action="store_true", help="every frame as a JSON line")
    watching.add_argument(
        "--yes", action="store_true", help="approve once each call that asks (detached turns)"
    )
    add_session_commands(commands)
    add_owner_commands(commands)
    add_memory_command(commands)
    add_schedule_command(commands)
    add_gateway_command(commands)
    add_replay_command(commands)
    add_fork_command(commands)
    add_undo_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    output = Output(sys.stdout, sys.stderr, sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    if args.command in SESSION_COMMANDS:
        return run_command(args, os.environ, output, sys.stdin)
    if args.command == MEMORY_COMMAND:
        return run_memory(args, os.environ, output)
    if args.command == SCHEDULE_COMMAND:
        return run_schedule(args, os.environ, output)
    if args.command == GATEWAY_COMMAND:
        return run_gateway(args, os.environ, output)
    if args.command in OWNER_COMMANDS:
        return run_owner_command(args, os.environ, output)
    if args.command == REPLAY_COMMAND:
        run_replay(args)
    if args.command == FORK_COMMAND:
        return run_fork(args, os.environ, output)
    if args.command == UNDO_COMMAND:
        from .undo_command import run_undo

        return run_undo(args, os.environ, output)
    if args.command not in ("chat", "watch"):
        parser.print_help()
        return EXIT_USAGE
    # Only a chat pays for trio and the chat's modules (`bxctl sessions` starts in half the time).
    import trio

    from .chat_command import run_chat, run_watch

    try:
        return trio.run(run_chat if args.command == "chat" else run_watch, args, os.environ)
    except KeyboardInterrupt:  # before the signal receiver was in place
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
