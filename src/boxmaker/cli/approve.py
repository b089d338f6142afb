"""The owner's answers to calls that wait for approval: asked at the terminal while a turn
runs (`KeyAsker`), given at once by `bxctl chat --yes` (`YesAsker`), or from another terminal
with `bxctl approvals` (listing what waits, and answering one by its id).

An answer is a frame of its own on a new connection to `loop.sock` (`approval {id, answer}`),
as a steering message is: the turn's own connection takes nothing after its turn frame. At
the terminal the question takes the keys while it stands (the steering line waits for it):
`y` once, `s` the session, `a` always, anything else no.
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from ..client import ChannelError, ask
from ..proto import (
    Answer,
    ApprovalDoneFrame,
    ApprovalFrame,
    ApprovalNeeded,
    ListApprovalsFrame,
    WaitingFrame,
    WireError,
)
from .chat import Chat, Question
from .render import escape_controls

__all__ = ["KEYS", "KeyAsker", "YesAsker", "list_waiting", "question", "send_answer", "shown"]

SHOWN_LINES = 400  # of a call's detail, at the terminal (brokerd's holds fewer)
SHOWN_CHARS = 16384

KEYS = {"y": Answer.ONCE, "s": Answer.SESSION, "a": Answer.ALWAYS}


def question(needed: ApprovalNeeded, color: bool = False) -> str:
    summary = needed.summary.replace("\n", " ")
    if needed.only_once:  # the session's ask mode: no grant is kept
        return f"{shown(needed.detail, color)}Allow {summary} (ask mode)? [y]es once, [N]o "
    answers = "[y]es once, [s]ession, [a]lways, [N]o"
    return f"{shown(needed.detail, color)}Allow {summary}? {answers} "


CHANGE = "change (a unified diff):"  # brokerd's heading of a file tool's diff in a detail
_DIFF_COLORS = (("  +", "\x1b[32m"), ("  -", "\x1b[31m"), ("  @@", "\x1b[36m"))


def shown(detail: str, color: bool = False) -> str:
    """A call's detail as the terminal shows it: each line behind a bar, control characters
    escaped, at most `SHOWN_LINES` lines and `SHOWN_CHARS` characters (what is left out,
    said: brokerd's detail never needs it, another's might); with `color`, the lines of a
    diff under `change:` green (added), red (taken out) and cyan (where)."""
    if not detail:
        return ""
    kept = "\n".join(detail[:SHOWN_CHARS].split("\n")[:SHOWN_LINES])
    lines = escape_controls(kept).split("\n")
    if color:
        lines = _painted(lines)
    text = "".join(f"  │ {line}\n" for line in lines)
    if len(kept) < len(detail):
        text += f"  │ [… {len(detail) - len(kept):,} more characters not shown]\n"
    return text


def _painted(lines: list[str]) -> list[str]:
    """`lines` with the diff after the `change:` heading coloured, line by line."""
    if CHANGE not in lines:
        return lines
    at = lines.index(CHANGE) + 1
    painted = []
    for line in lines[at:]:
        paint = next((code for start, code in _DIFF_COLORS if line.startswith(start)), "")
        painted.append(f"{paint}{line}\x1b[0m" if paint else line)
    return [*lines[:at], *painted]


async def send_answer(socket: Path, id: str, answer: Answer) -> str | None:
    """Give loopd the answer to the call waiting as `id`; what went wrong, else None."""
    try:
        frame = await ask(socket, ApprovalFrame(id, answer))
    except ChannelError as error:
        return str(error)
    if isinstance(frame, ApprovalDoneFrame):
        return None
    if isinstance(frame, WireError):
        return frame.message
    return f"loopd answered {type(frame).__name__}"


async def list_waiting(socket: Path) -> WaitingFrame | str:
    """What waits for the owner now, or what went wrong."""
    try:
        frame = await ask(socket, ListApprovalsFrame())
    except ChannelError as error:
        return str(error)
    if isinstance(frame, WaitingFrame):
        return frame
    return frame.message if isinstance(frame, WireError) else f"loopd answered {frame!r}"


class YesAsker:
    """`bxctl chat --yes`: every call that asks is approved once, and said so."""

    async def ask(self, chat: Chat, needed: ApprovalNeeded) -> None:
        chat.status(f"approved once (--yes): {needed.summary}")
        if needed.detail:
            chat.prompt(shown(needed.detail))
        if (problem := await send_answer(chat.socket, needed.id, Answer.ONCE)) is not None:
            chat.status(f"the approval was not taken: {problem}")

    def answered(self, id: str) -> None:
        pass


class KeyAsker:
    """The question at the terminal: one key answers it. While it stands `chat.question` is
    set: the steering task, when there is one, hands it the key instead of opening its line
    (only one task may wait on the terminal)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._asking: dict[str, trio.CancelScope] = {}

    async def ask(self, chat: Chat, needed: ApprovalNeeded) -> None:
        while True:  # one question at a time, and never under the steering line
            if chat.question is not None:
                await chat.question.answered.wait()
            elif chat.line_closed is not None:
                await chat.line_closed.wait()
            else:
                break
        asked = chat.question = Question()
        scope = self._asking[needed.id] = trio.CancelScope()
        try:
            with scope:
                chat.prompt(question(needed, chat.renderer.color))
                key = await (asked.key() if chat.steering else self._key())
                answer = KEYS.get(key[:1].decode(errors="replace").lower(), Answer.DENY)
                if needed.only_once and answer is not Answer.DENY:
                    answer = Answer.ONCE  # the ask mode offers once and no
                chat.prompt(f"{answer.value}\n")
                if (problem := await send_answer(chat.socket, needed.id, answer)) is not None:
                    chat.status(f"the answer was not taken: {problem}")
            if scope.cancelled_caught:
                chat.prompt("(answered elsewhere)\n")
        finally:
            del self._asking[needed.id]
            chat.question = None
            asked.answered.set()

    def answered(self, id: str) -> None:
        if (scope := self._asking.get(id)) is not None:
            scope.cancel()

    async def _key(self) -> bytes:
        while True:
            await trio.lowlevel.wait_readable(self.fd)
            if data := os.read(self.fd, 16):
                return data
