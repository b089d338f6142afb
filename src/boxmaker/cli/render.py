"""How `bxctl chat` shows a turn in a terminal. Pure: frames in, text out.

Content streams as it comes; reasoning is dimmed (on a colour terminal; otherwise it is marked
`[thinking]`); each tool call is one line; `queued`, `waiting`, `retrying`, `thinking_capped`,
`cache_cold`, `cache_loss`, `epoch_start`, `length`, `queued_message` and `message_taken` are
one status line each; a `cache_loss` that a `cache_cold` of the same turn said before the
answer is not said again. On a TTY, while a request waits for its first text, a live status line
(`status.py`: progress, seconds, a spinner) is redrawn by `tick(now)` and erased when the
answer starts. A `retrying` event takes back what the failed attempt showed: on a TTY the text
is erased, elsewhere a status line says it is dropped.

On a terminal, text from the model or the server never reaches it raw: control characters
other than newline and tab are shown escaped (`escape_controls`), so an answer cannot write the
clipboard (OSC 52), retitle the window or clear the screen. Error lines are always escaped;
`--json` (not rendered here) keeps the exact text.
"""

from __future__ import annotations

import math
import re

from ..proto import (
    ApprovalAnswered,
    ApprovalNeeded,
    CacheCold,
    CacheLoss,
    Content,
    DataClass,
    EpochStart,
    Length,
    LossCause,
    MessageTaken,
    Progress,
    Queued,
    QueuedMessage,
    Reasoning,
    Repetition,
    Retrying,
    ThinkingCapped,
    ToolCallStarted,
    ToolResult,
    ToolsOff,
    TurnDoneFrame,
    TurnEvent,
    Waiting,
    WireError,
    WrapUpReason,
)
from .status import StatusLine

__all__ = ["Renderer", "cache_line", "escape_controls"]

DIM = "\x1b[2m"
RESET = "\x1b[0m"
CLEAR_LINE = "\r\x1b[K"

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1


def escape_controls(text: str) -> str:
    """`text` as it may be written to a terminal: each control character other than newline
    and tab as an escape a person can read (`\\x1b`, `\\x07`, ...)."""
    return _CONTROLS.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


_TOOLS_OFF = {
    WrapUpReason.BAD_BLOCKS: "a second tool block could not be read",
    WrapUpReason.REPEATED_CALL: "the same tool block again",
    WrapUpReason.TOOL_ITERATIONS: "too many tool steps",
}


def cache_line(expected: int, got: int, cause: LossCause | None, detail: str) -> str:
    """The status line of a `cache_loss`: why, in words, then how much was reused. An expected
    cause (a server restart) reads as a note; a changed prefix says it is a bug."""
    reused = f"the server reused {got} of {expected} prompt tokens"
    match cause:
        case None:  # a loopd from before causes
            return f"cache: {reused}; it recomputed the rest"
        case LossCause.SERVER_RESTARTED:
            return f"cache: {detail}, so {reused}"
        case LossCause.SLOT_TAKEN:
            return f"cache: {detail}; {reused}"
        case LossCause.EVICTED:
            return f"cache: {reused}: its prompt cache let this session go (README: the cache)"
    return f"cache lost, a bug in loopd: {detail}; {reused}"


class Renderer:
    """Turns one chat's events into terminal text. `tty`: stdout is a terminal (live lines,
    erasing); `color`: ANSI styles may be used (a TTY without NO_COLOR)."""

    def __init__(self, *, tty: bool, color: bool, width: int = 80, unicode: bool = True) -> None:
        self.tty = tty
        self.color = color
        self.width = max(width, 20)
        self.status = StatusLine(unicode=unicode)
        self._reset_turn()

    def _reset_turn(self) -> None:
        self._column = 0  # characters on the current line
        self._reasoning = False  # inside reasoning text
        self._progress = False  # the live status line is showing
        self._attempt = ""  # text the current completion attempt has shown
        self._cold: LossCause | None = None  # a miss said before the answer (`cache_cold`)
        self.status.stop()

    def waiting(self, now: float) -> None:
        """A turn was sent at `now`: the status line may show until its first text."""
        self.status.start(now)

    def tick(self, now: float) -> str:
        """The live status line redrawn for `now` (on a TTY while waiting; else nothing)."""
        line = self.status.text(now, self.width) if self.tty and not self._column else None
        if line is None:
            return ""
        self._progress = True
        return CLEAR_LINE + self._dim(line)

    def event(self, event: TurnEvent, now: float = 0.0) -> str:
        """The text for one event; `now` (bxctl's clock) starts the status line's next wait."""
        match event:
            case Content(text=text):
                self.status.stop()
                return self._text(text, reasoning=False)
            case Reasoning(text=text):
                self.status.stop()
                return self._text(text, reasoning=True)
            case Progress(total=total, cache=cache, processed=processed):
                self.status.progress(total, cache, processed)
                return self.tick(now)
            case ToolCallStarted(name=name):
                name = self._safe(name)
                self.status.stop()
                out = self._break_line()
                self._attempt = ""
                self._column = len(name) + 7
                return out + self._dim(f"[tool] {name}")
            case ToolResult(data_class=data_class, truncated=truncated, is_error=is_error):
                self._column = 0
                self.status.start(now)  # the next completion's prompt
                said = " ... failed" if is_error else " ... done"
                if data_class is not DataClass.PUBLIC:  # what it read is the owner's
                    said += f" ({data_class.value})"
                return self._dim(said + (", cut to the size limit" if truncated else "")) + "\n"
            case Retrying(attempt=attempt, after_ms=after_ms, error=error):
                out = self._take_back()
                self.status.start(now)
                return out + self._status(
                    f"retrying (attempt {attempt}) in {after_ms / 1000:g} s: {self._safe(error)}"
                )
            case Queued(ahead=ahead):
                return self._status(f"queued behind {ahead} request{'s' if ahead != 1 else ''}")
            case Waiting(slot_busy=slot):
                return self._status(
                    f"waiting: the server's slot {slot} is busy with another client"
                )
            case ThinkingCapped(tokens=tokens):
                return self._status(f"thinking capped at {tokens} tokens")
            case CacheCold(cause=cause, detail=detail):
                self._cold = cause
                return self._status(
                    f"cache: {self._safe(detail)}, so it processes the whole prompt again"
                )
            case CacheLoss(cause=cause) if cause is not None and cause is self._cold:
                self._cold = None  # said once, before the answer
                return ""
            case CacheLoss(expected=expected, got=got, cause=cause, detail=detail):
                line = cache_line(expected, got, cause, self._safe(detail or ""))
                if cause is LossCause.PREFIX_CHANGED:  # a bug, not the weather: not dimmed
                    return self._break_line() + f"[{line}]\n"
                return self._status(line)
            case EpochStart(epoch=epoch, carried_turns=carried, summary_tokens=tokens):
                summary = f"a summary of {tokens} tokens" if tokens else "no summary"
                turns = f"{carried} turn{'s' if carried != 1 else ''}"
                return self._status(
                    f"epoch {epoch}: the conversation goes on from {summary} and {turns} "
                    "carried over"
                )
            case ApprovalNeeded(summary=summary):
                self.status.stop()
                return self._status(f"approval: {self._safe(summary)} waits for the owner")
            case ApprovalAnswered(answer=answer):
                return self._status(f"approval: {answer.value}")
            case Length(predicted_n=predicted):
                return self._status(f"the answer was cut at {predicted} tokens (max_tokens)")
            case ToolsOff(reason=reason):
                return self._status(f"no more tools this turn ({_TOOLS_OFF[reason]}); answering")
            case Repetition():
                return self._status("the answer kept repeating itself; stopped there")
            case QueuedMessage(ahead=ahead):
                return self._status(
                    f"queued behind {ahead} message{'s' if ahead != 1 else ''} in the session: "
                    "it runs when they are done"
                )
            case MessageTaken():
                return self._status("the model takes the queued message into this turn")
        return ""

    def done(self, frame: TurnDoneFrame) -> str:
        out = self._break_line()
        self._reset_turn()
        return out

    def error(self, frame: WireError) -> str:
        """The line for stderr; what was shown of the turn is closed off first (see `end`)."""
        return f"error: {frame.code.value}: {escape_controls(frame.message)}\n"

    def pause(self) -> str:
        """Close the line the turn left open, the turn going on (the steering line opens)."""
        return self._break_line()

    def note(self, message: str) -> str:
        """One status line of bxctl's own, on a line of its own."""
        return self._status(message)

    def end(self) -> str:
        """Close whatever line the turn left open (before an error or a cancel)."""
        out = self._break_line()
        self._reset_turn()
        return out

    def _safe(self, text: str) -> str:
        return escape_controls(text) if self.tty else text

    def _text(self, text: str, *, reasoning: bool) -> str:
        text = self._safe(text)
        out = self._clear_progress()
        if reasoning and not self._reasoning:
            out += self._break_line()
            out += DIM if self.color else "[thinking] "
            self._reasoning = True
        elif not reasoning and self._reasoning:
            out += (RESET if self.color else "") + "\n"
            self._column = 0
            self._reasoning = False
        out += text
        self._attempt += text
        last = text.rsplit("\n", 1)
        self._column = len(last[-1]) if len(last) > 1 else self._column + len(text)
        return out

    def _take_back(self) -> str:
        """Undo what the failed attempt showed."""
        shown, self._attempt = self._attempt, ""
        out = (RESET if self.color and self._reasoning else "") + self._clear_progress()
        self._reasoning = False
        if not shown:
            return out
        if not self.tty:
            return out + self._break_line() + self._dim("[the text above is dropped]") + "\n"
        rows = sum(max(1, math.ceil(len(line) / self.width)) for line in shown.split("\n"))
        self._column = 0
        return out + "\r" + (f"\x1b[{rows - 1}A" if rows > 1 else "") + "\x1b[J"

    def _status(self, message: str) -> str:
        return self._clear_progress() + self._break_line() + self._dim(f"[{message}]") + "\n"

    def _break_line(self) -> str:
        out = self._clear_progress()
        if self._reasoning:
            out += RESET if self.color else ""
            self._reasoning = False
        if self._column:
            self._column = 0
            out += "\n"
        return out

    def _clear_progress(self) -> str:
        if self._progress:
            self._progress = False
            return CLEAR_LINE
        return ""

    def _dim(self, text: str) -> str:
        return f"{DIM}{text}{RESET}" if self.color else text
