"""Undo and modes from the command line and the chat (SPEC section 21).

`bxctl undo SESSION [--turn N | --call C] [--force] [--yes] [--json]` asks loopd for the
preview of undoing the session's changes from that turn (or call) on (the last turn without
either), shows it (what changes, a diff for a text file, and what others changed since,
which stops it unless `--force`), asks, and sends the confirm with the preview's token. In a
chat, `/undo` undoes the last turn's changes, `/rewind N` those from turn N on, `/mode
[MODE]` shows or sets the session's mode, and `/plan MESSAGE` runs one read-only turn
asking for a plan, then asks whether to carry it out. bxctl writes no log: loopd does.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from .. import layout
from ..config import DEFAULT_HOME
from ..proto import (
    ErrorCode,
    FileOffer,
    Frame,
    InvalidValue,
    Mode,
    ModeFrame,
    ModeSetFrame,
    SessionId,
    UndoFrame,
    UndoneFrame,
    UndoPreviewFrame,
    WireError,
    unstructure,
)
from .render import escape_controls


class Chat(Protocol):
    """What the chat's acts need of `chat.Chat`."""

    socket: Path
    session: SessionId
    turn_mode: Mode | None
    files: list[FileOffer]

    def note(self, text: str) -> None: ...

    async def turn(self, content: str) -> int: ...


__all__ = [
    "COMMAND",
    "PLAN",
    "WORK",
    "add_command",
    "chat_act",
    "preview_text",
    "run_undo",
    "set_mode",
    "undo",
]

COMMAND = "undo"
PLAN = (
    "Make a plan for this, step by step, without changing anything yet (this turn is "
    "read-only: read what you need, then answer with the plan):\n\n{message}"
)
WORK = "Carry out the plan now."


def add_command(commands: Any) -> None:
    undoing = commands.add_parser(
        COMMAND,
        help="take back a session's changes to the workspace (a preview first)",
        description="Restore the workspace (and the roots the file tools wrote) to what they "
        "held before a turn or a call of SESSION: every change of the session's from there "
        "on is taken back, byte for byte. The preview lists what changes (a diff for text); "
        "a file someone else changed since stops the undo unless --force.",
    )
    undoing.add_argument("session", help="the session whose changes are undone")
    which = undoing.add_mutually_exclusive_group()
    which.add_argument("--turn", type=int, metavar="N", help="from turn N on (default: the last)")
    which.add_argument("--call", type=int, metavar="C", help="from call C on")
    undoing.add_argument("--force", action="store_true", help="overwrite others' changes too")
    undoing.add_argument("--yes", action="store_true", help="undo without asking")
    undoing.add_argument("--json", action="store_true", help="the preview and result as JSON")
    undoing.add_argument("--socket", type=Path, help="loopd's socket")


async def undo(
    socket: Path,
    frame: UndoFrame,
    confirm: Callable[[UndoPreviewFrame], Awaitable[bool]],
    shown: Callable[[str], None],
) -> tuple[int, Frame | None]:
    """Preview the undo `frame` asks for, show it, and make it when `confirm` says so: the
    exit status (0 done or declined, 1 refused or stopped by others' changes, 3 no loopd)
    and loopd's last answer."""
    from ..client import ChannelError, ask  # trio: only for a command that talks to loopd

    try:
        preview = await ask(socket, frame)
        if not isinstance(preview, UndoPreviewFrame):
            shown(_refused(preview))
            return 1, preview
        shown(preview_text(preview, force=frame.force))
        if not preview.changes or (preview.conflicts and not frame.force):
            return (1 if preview.conflicts else 0), preview
        if not await confirm(preview):
            shown("nothing was undone\n")
            return 0, preview
        done = await ask(socket, attrs.evolve(frame, confirm=preview.token))
    except ChannelError as error:
        shown(f"error: {error}\n")
        return 3, None
    if not isinstance(done, UndoneFrame):
        shown(_refused(done))
        return 1, done
    more = f" and {done.more} more" if done.more else ""
    shown(f"undone: {len(done.restored)} paths{more} restored\n")
    return 0, done


def preview_text(preview: UndoPreviewFrame, *, force: bool = False) -> str:
    """The preview as a person reads it: each change, a text file's diff behind a bar, then
    what others changed since, and what cannot be undone."""
    lines = [f"  {change.action:7} {escape_controls(change.path)}" for change in preview.changes]
    for change in preview.changes:
        if change.diff:
            lines += [f"  │ {line}" for line in escape_controls(change.diff).rstrip().split("\n")]
    if preview.conflicts:
        verb = "overwritten (--force)" if force else "in the way (the undo stops; --force)"
        lines.append(f"changed since by someone else, {verb}:")
        lines += [f"  {escape_controls(c.path)}: {c.action}" for c in preview.conflicts]
    lines += [f"note: {escape_controls(note)}" for note in preview.notes]
    if not preview.changes:
        lines.append("nothing to undo: the files are as they were")
    return "\n".join(lines) + "\n"


def _refused(answer: Frame) -> str:
    said = answer.message if isinstance(answer, WireError) else repr(answer)
    return f"error: {escape_controls(said)}\n"


def run_undo(args: argparse.Namespace, environ: Mapping[str, str], out: Any) -> int:
    """`bxctl undo`."""
    import sys

    import trio

    home = Path(environ.get("BOXMAKER_HOME") or DEFAULT_HOME)
    socket = args.socket or layout.loop_socket(home)

    try:
        frame = UndoFrame(SessionId(args.session), args.turn, args.call, args.force, by="bxctl")
    except InvalidValue as error:
        out.err.write(f"error: {error}\n")
        return 2
    said: list[str] = []

    def shown(text: str) -> None:
        if args.json:
            said.append(text)
        else:
            out.out.write(text)
            out.out.flush()

    async def confirm(_preview: UndoPreviewFrame) -> bool:
        if args.yes:
            return True
        if args.json or not sys.stdin.isatty():
            shown("not undone: say --yes to undo without a terminal to ask at\n")
            return False
        out.out.write("Undo these changes? [y/N] ")
        out.out.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    code, last = trio.run(undo, socket, frame, confirm, shown)
    if args.json:
        out.out.write(json.dumps(unstructure(last) if last is not None else None) + "\n")
    return code


async def set_mode(
    socket: Path, session: SessionId, mode: Mode | None, *, unless_new: bool = False
) -> str | None:
    """Set `session`'s mode (None: ask it); what happened, in words (`unless_new`: None when
    the session does not exist yet, for its first turn to make it)."""
    from ..client import ChannelError, ask

    try:
        answer = await ask(socket, ModeFrame(session, mode, by="bxctl"))
    except ChannelError as error:
        return f"error: {error}"
    if unless_new and isinstance(answer, WireError) and answer.code is ErrorCode.NO_SUCH_SESSION:
        return None
    if isinstance(answer, ModeSetFrame):
        was = "" if answer.was is answer.mode else f" (was {answer.was.value})"
        return f"[the session's mode is {answer.mode.value}{was}]"
    return _refused(answer).rstrip("\n")


async def chat_act(
    line: Callable[[str], Awaitable[str | None]], chat: Chat, name: str, rest: str
) -> int:
    """The chat's `/undo`, `/rewind N`, `/mode MODE`, `/plan MESSAGE` and `/attach PATH`
    (`line` asks a question and reads the answer): 0, or the exit code of a plan's turn that
    failed."""
    if name == "/attach":
        from .attach_command import attach_path

        chat.note((await attach_path(chat, rest))[1])
        return 0
    if name == "/mode":
        try:
            mode = Mode(rest.strip()) if rest.strip() else None
        except ValueError:
            chat.note("/mode takes read-only, ask or auto (alone: which it is)")
            return 0
        chat.note(await set_mode(chat.socket, chat.session, mode) or "")
        return 0
    if name == "/plan":
        return await _plan(line, chat, rest)
    words = rest.split()
    if name == "/rewind" and not (len(words) == 1 and words[0].isdigit()):
        chat.note("/rewind takes the number of the first turn to take back")
        return 0
    turn = int(words[0]) if name == "/rewind" else None
    frame = UndoFrame(chat.session, turn, by="bxctl chat")

    async def confirm(_preview: UndoPreviewFrame) -> bool:
        return (await line("Undo these changes? [y/N] ") or "").strip().lower() in ("y", "yes")

    await undo(chat.socket, frame, confirm, lambda text: chat.note(text.rstrip("\n")))
    return 0


async def _plan(line: Callable[[str], Awaitable[str | None]], chat: Chat, message: str) -> int:
    """One read-only turn that asks for a plan; then, if the owner says so, the turn that
    carries it out in the session's own mode."""
    if not message.strip():
        chat.note("/plan takes the message to plan for")
        return 0
    chat.turn_mode = Mode.READ_ONLY
    code = await chat.turn(PLAN.format(message=message))
    if code:
        return code
    answer = await line("Carry out the plan? [y/N] ")
    if (answer or "").strip().lower() not in ("y", "yes"):
        chat.note("[the plan was not carried out]")
        return 0
    return await chat.turn(WORK)
