"""`bxctl chat`: the command-line channel to loopd (SPEC section 9).

    bxctl chat [--socket PATH] [--session ID] [--no-thinking] [--say TEXT] [--json]
               [--new-epoch]

Interactive by default: one turn per line of stdin, the answer streaming as it comes; EOF or
`/quit` ends it; `/new-epoch` makes the next message open a fresh epoch (`--new-epoch`, the
first); Ctrl-C during a turn cancels the turn (its connection is closed) and returns
to the prompt, Ctrl-C at the prompt exits. `--say` runs one turn: the answer on stdout and exit
0, or the error on stderr and exit 1. `--json` prints every frame's body as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TextIO

import trio

from .. import __version__
from ..channel import ChannelError, open_channel
from ..config import DEFAULT_HOME
from ..proto import (
    ErrorCode,
    Frame,
    InvalidValue,
    SessionId,
    TurnDoneFrame,
    TurnEventFrame,
    TurnFrame,
    WireError,
    encode,
    unstructure,
)
from .render import Renderer
from .sessions import COMMANDS as SESSION_COMMANDS
from .sessions import Output, entries, find, home_of, run_command
from .sessions import add_commands as add_session_commands

__all__ = ["main", "new_session_id"]

Mode = Literal["stream", "json", "answer"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bxctl", description="Talk to Boxmaker's loopd over its Unix socket."
    )
    parser.add_argument("--version", action="version", version=f"bxctl {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat = commands.add_parser(
        "chat", help="chat with the agent", description="Chat with the agent, one turn a line."
    )
    chat.add_argument("--socket", type=Path, help="loopd's socket (default: "
                      "$BOXMAKER_HOME/run/loop/loop.sock)")  # fmt: skip
    chat.add_argument("--session", help="continue (or start) this session id")
    chat.add_argument("--no-thinking", action="store_true", help="ask without thinking")
    chat.add_argument("--say", metavar="TEXT", help="run one turn, print the answer, exit")
    chat.add_argument("--json", action="store_true", help="print every frame body as JSON")
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


class Chat:
    """One chat: a session, and how its turns are sent and shown."""

    def __init__(self, socket: Path, session: SessionId, *, resume: bool, thinking: bool,
                 mode: Mode, out: TextIO, err: TextIO) -> None:  # fmt: skip
        self.socket = socket
        self.session = session
        self.resume = resume
        self.thinking = thinking
        self.mode = mode
        self.out = out
        self.err = err
        self.new_epoch = False  # the next turn opens a fresh epoch first
        tty = out.isatty()
        color = tty and "NO_COLOR" not in os.environ
        self.renderer = Renderer(tty=tty, color=color, width=shutil.get_terminal_size().columns)

    def ask_new_epoch(self) -> str:
        """`/new-epoch`: the next turn opens a fresh epoch; the line that says so."""
        self.new_epoch = True
        return "[the next message opens a new epoch: a summary and the newest turns go on]\n"

    async def turn(self, content: str) -> Frame:
        """Run one turn, showing it; the final frame (turn_done or error)."""
        final = await self._send(content, self.resume)
        self.new_epoch = False
        if isinstance(final, WireError):
            # Continue a session that exists, or start one that does not, whichever it is.
            if final.code is ErrorCode.NO_SUCH_SESSION and self.resume:
                final = await self._send(content, False)
            elif final.code is ErrorCode.SESSION_EXISTS and not self.resume:
                final = await self._send(content, True)
        if not (isinstance(final, WireError) and final.code is ErrorCode.NO_SUCH_SESSION):
            self.resume = True
        return final

    async def _send(self, content: str, resume: bool) -> Frame:
        frame = TurnFrame(session=self.session, content=content, resume=resume,
                          thinking=self.thinking, new_epoch=self.new_epoch)  # fmt: skip
        async with await open_channel(self.socket) as channel:
            await channel.send(frame)
            while True:
                received = await channel.receive()
                if self._quiet_retry(received, resume):
                    return received
                self.show(received)
                if isinstance(received, TurnDoneFrame | WireError):
                    return received

    def _quiet_retry(self, frame: Frame, resume: bool) -> bool:
        """The first answer of a resume-or-create guess is not shown when it will be retried."""
        if not isinstance(frame, WireError):
            return False
        return (frame.code is ErrorCode.NO_SUCH_SESSION and resume) or (
            frame.code is ErrorCode.SESSION_EXISTS and not resume
        )

    def show(self, frame: Frame) -> None:
        if self.mode == "json":
            self.out.write(encode(unstructure(frame)["body"]).decode() + "\n")
        elif self.mode == "answer":  # --say: the answer is printed whole at the end
            if isinstance(frame, WireError):
                self.err.write(self.renderer.error(frame))
        elif isinstance(frame, TurnEventFrame):
            self.out.write(self.renderer.event(frame.event))
        elif isinstance(frame, TurnDoneFrame):
            self.out.write(self.renderer.done(frame))
        elif isinstance(frame, WireError):
            self.out.write(self.renderer.end())
            self.out.flush()
            self.err.write(self.renderer.error(frame))
        self.out.flush()

    def cancelled(self) -> None:
        if self.mode == "stream":
            self.out.write(self.renderer.end())
        self.err.write("[turn cancelled]\n")
        self.out.flush()


async def say(chat: Chat, text: str) -> int:
    """One turn: the answer on stdout (exit 0), or the error on stderr (exit 1)."""
    try:
        final = await chat.turn(text)
    except ChannelError as error:
        chat.err.write(f"error: {error}\n")
        return 1
    if not isinstance(final, TurnDoneFrame):
        return 1
    if chat.mode == "answer":
        chat.out.write(final.content + "\n")
        chat.out.flush()
    return 0


async def interactive(chat: Chat, read_line: Callable[[], str]) -> int:
    prompt = sys.stdin.isatty()
    turn_scope: list[trio.CancelScope] = []
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:

            async def on_interrupt() -> None:
                async for _ in interrupts:
                    if turn_scope:
                        turn_scope[-1].cancel()  # Ctrl-C in a turn: cancel it
                    else:
                        nursery.cancel_scope.cancel()  # Ctrl-C at the prompt: leave

            nursery.start_soon(on_interrupt)
            while True:
                if prompt:
                    chat.out.write("> ")
                    chat.out.flush()
                line = await trio.to_thread.run_sync(read_line, abandon_on_cancel=True)
                if not line or line.strip() == "/quit":
                    break
                if not line.strip():
                    continue
                if line.strip() == "/new-epoch":
                    chat.err.write(chat.ask_new_epoch())
                    continue
                with trio.CancelScope() as scope:
                    turn_scope.append(scope)
                    try:
                        await chat.turn(line.rstrip("\n"))
                    except ChannelError as error:
                        chat.out.write(chat.renderer.end())
                        chat.err.write(f"error: {error}\n")
                    finally:
                        turn_scope.pop()
                if scope.cancelled_caught:
                    chat.cancelled()
            nursery.cancel_scope.cancel()
    if prompt:
        chat.out.write("\n")
    return 0


def chosen_session(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The id `--session` or `-c` names, checked against the home; None (said on stderr) when
    there is no such session. A new id needs `--new`; no option at all starts a new one."""
    home = home_of(args.home, environ)
    if args.resume_last:
        listed = entries(home)
        if not listed:
            sys.stderr.write(f"error: no session to continue in {home / 'sessions'}\n")
            return None
        return listed[0].id
    if args.session is None or args.new or not (home / "sessions").is_dir():
        return args.session or new_session_id().value
    if (home / "sessions" / args.session).is_dir():
        return str(args.session)
    folder = find(home, args.session, sys.stderr)
    if folder is None:
        sys.stderr.write("(start a new session with this id with --new)\n")
    return folder.name if folder else None


async def run_chat(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    chosen = chosen_session(args, environ)
    if chosen is None:
        return 1
    try:
        session = SessionId(chosen)
    except InvalidValue as error:
        sys.stderr.write(f"error: {error}\n")
        return 1
    chat = Chat(
        args.socket or default_socket(environ),
        session,
        resume=args.session is not None or args.resume_last,
        thinking=not args.no_thinking,
        mode="json" if args.json else "answer" if args.say is not None else "stream",
        out=sys.stdout,
        err=sys.stderr,
    )
    chat.new_epoch = args.new_epoch
    if args.json:
        chat.out.write(json.dumps({"session": session.value}) + "\n")
    elif args.say is not None:
        chat.err.write(f"session {session}\n")
    else:
        chat.out.write(f"session {session}\n")
    chat.out.flush()
    if args.say is not None:
        return await say(chat, args.say)
    return await interactive(chat, sys.stdin.readline)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in SESSION_COMMANDS:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        output = Output(sys.stdout, sys.stderr, color)
        return run_command(args, os.environ, output, sys.stdin)
    if args.command != "chat":
        parser.print_help()
        return 2
    try:
        return trio.run(run_chat, args, os.environ)
    except KeyboardInterrupt:  # before the signal receiver was in place
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
