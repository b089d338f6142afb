"""`bxctl chat` put together: the terminal, the renderer, the line editor and the channel to
loopd, for one chat (`bxctl.main` imports it only for a chat, so the other commands start
without trio and the chat's modules)."""

from __future__ import annotations

import argparse
import functools
import io
import secrets
import shutil
import signal
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import trio

from .. import layout
from ..client import ChannelError
from ..config import DEFAULT_HOME
from ..proto import InvalidValue, SessionId, parse_json
from ..proto import Mode as SessionMode
from ..store import FileSystem, entries, epoch_views
from .attach_command import attach_path
from .chat import Asker, Chat, Failed, Mode, Reader, Steer
from .commands import EXIT_CANCELLED, EXIT_NO_LOOPD, EXIT_USAGE
from .conversation import missed
from .fork_command import chat_fork
from .jsonout import JsonOut
from .memory_command import memory_listing
from .render import Renderer, escape_controls
from .schedule_command import schedules_listing
from .sessions import Output, find, home_of, sessions
from .terminal import Keyboard, Screen
from .turns import interactive, say
from .undo_command import chat_act, set_mode
from .watch import Others, watch

__all__ = [
    "NoSession",
    "chosen_session",
    "default_socket",
    "new_session_id",
    "run_chat",
    "run_watch",
]


def default_socket(environ: Mapping[str, str]) -> Path:
    home = Path(environ.get("BOXMAKER_HOME") or DEFAULT_HOME)
    return layout.loop_socket(home)


def new_session_id(now: datetime | None = None) -> SessionId:
    """`chat-YYYYMMDD-HHMMSS-xxxx`: the time, then a random suffix."""
    moment = now or datetime.now(UTC)
    return SessionId(f"chat-{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}")


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
            raise NoSession(f"no session to continue in {layout.sessions_folder(home)}")
        return listed[0].id
    if args.session is None or args.new or not layout.sessions_folder(home).is_dir():
        return str(args.session or new_session_id())
    if (layout.sessions_folder(home) / args.session).is_dir():
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
    chat = Chat(
        args.socket or default_socket(environ),
        session,
        resume=resume,
        thinking=not args.no_thinking,
        mode=mode,
        out=screens[0],
        err=screens[1],
        renderer=renderer,
        json=json,
    )
    try:
        await chat.probe()
    except Failed as failure:
        return chat.fail(failure)
    chat.new_epoch = args.new_epoch
    chat.asker = _asker(args, mode)
    chat.announce()
    if args.session_mode is not None:  # a new session's is set once its first turn made it
        chat.turn_mode = chat.pending_mode = SessionMode(args.session_mode)
        if resume:  # a guess: it may not exist yet
            said = await set_mode(chat.socket, session, chat.pending_mode, unless_new=True)
            if said is not None:
                chat.turn_mode = chat.pending_mode = None
                chat.note(said)
    for path in args.attach:  # before the first message, which carries them
        code, said = await attach_path(chat, path)
        if code:
            return chat.fail(Failed(code, "not_attached", said))
        chat.note(said)
    if resume and mode == "stream" and args.say is None:
        for line in since_last_looked(home_of(args.home, environ), session):
            chat.note(line)
    if args.say is not None:
        return await say(chat, args.say)
    reader, person = _reader(mode, environ)
    home = home_of(args.home, environ)

    def listing() -> str:
        buffer = io.StringIO()
        now = datetime.now(UTC)
        sessions(home, Output(buffer, buffer, color=renderer.color), as_json=False, now=now)
        return buffer.getvalue().rstrip("\n")

    views = {"/memory": lambda: memory_listing(home), "/schedules": lambda: schedules_listing(home)}

    steer = _steer(reader, screens) if tty and person else None
    others = Others(chat, getattr(reader, "above", None)) if tty and person else None
    fork = functools.partial(chat_fork, home)

    async def answer(prompt: str) -> str | None:
        chat.note(prompt)
        return await trio.to_thread.run_sync(reader.read, "", abandon_on_cancel=True)

    acts = functools.partial(chat_act, answer)
    code = await interactive(
        chat, reader, new_session_id, listing, steer, views, others, fork, acts
    )
    return 0 if person else code


async def run_watch(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """`bxctl watch SESSION...`: every turn of those sessions until loopd stops or Ctrl-C."""
    out, err = sys.stdout, sys.stderr
    try:
        sessions = tuple(dict.fromkeys(SessionId(name) for name in args.sessions))
    except InvalidValue as error:
        err.write(f"error: {error}\n")
        return EXIT_USAGE
    tty = out.isatty() and not args.json
    mode: Mode = "json" if args.json else "stream"

    def make(sid: SessionId) -> Chat:
        renderer = Renderer(
            tty=tty,
            color=tty and "NO_COLOR" not in environ,
            width=shutil.get_terminal_size().columns,
        )
        chat = Chat(args.socket or default_socket(environ), sid, resume=True, thinking=True,
                    mode=mode, out=out, err=err, renderer=renderer)  # fmt: skip
        chat.asker = _asker(args, mode)
        return chat

    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:
            ended: list[str] = []

            async def watching() -> None:
                try:
                    ended.append(await watch(make(sessions[0]).socket, sessions, make, args.json))
                except ChannelError as error:
                    ended.append(f"error: {error}")
                nursery.cancel_scope.cancel()

            nursery.start_soon(watching)
            async for _ in interrupts:
                nursery.cancel_scope.cancel()
                return EXIT_CANCELLED
    err.write(f"{ended[0]}\n")
    return EXIT_NO_LOOPD if ended[0].startswith("error:") else 0


def _steer(reader: Reader, screens: tuple[Screen, Screen]) -> Steer | None:
    """What is typed while a turn runs steers it: for a person at the line editor, with the
    turn's text on the same terminal."""
    from .editor import LineEditor
    from .steer import steered

    if not isinstance(reader, LineEditor):
        return None
    keyboard = Keyboard(sys.stdin.fileno())
    return functools.partial(steered, editor=reader, keyboard=keyboard, screens=screens)


def _asker(args: argparse.Namespace, mode: Mode) -> Asker | None:
    """Who answers a call that waits for approval: `--yes` (once, each), else the person at
    the terminal; with neither, nobody (loopd denies such calls at once)."""
    from .approve import KeyAsker, YesAsker

    if args.yes:
        return YesAsker()
    if mode == "stream" and sys.stdin.isatty():
        return KeyAsker(sys.stdin.fileno())
    return None


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


def since_last_looked(home: Path, session: SessionId) -> list[str]:
    """What ran in `session` since the last turn a person saw end (its index's `shown`): a
    schedule's turns while nobody watched. Nothing when it cannot be read."""
    folder = layout.session_folder(home, str(session))
    try:
        index = parse_json(FileSystem().read(folder / layout.INDEX))  # never a FIFO, a link
        shown = index.get("shown") if type(index) is dict else None
        if type(shown) is not int:  # an index from before `shown`: nothing is known missed
            return []
        # Plain, every control character escaped: the model's words, on a terminal.
        return [escape_controls(line) for line in missed(epoch_views(folder, every=False), shown)]
    except Exception:  # a hint: the chat goes on without it
        return []
