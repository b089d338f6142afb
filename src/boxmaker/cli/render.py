"""How `bxctl chat` shows a turn in a terminal. Pure: frames in, text out.

Content streams as it comes; reasoning is dimmed (on a colour terminal; otherwise it is marked
`[thinking]`); each tool call is one line; `queued`, `waiting`, `retrying`, `thinking_capped`,
`cache_loss`, `epoch_start` and `length` are one status line each; `progress` is a live line
on a TTY. A `retrying` event takes back what the failed attempt showed: on a TTY the text is
erased, elsewhere a status line says it is dropped.
"""

from __future__ import annotations

import math

from ..proto import (
    CacheLoss,
    Content,
    EpochStart,
    Length,
    Progress,
    Queued,
    Reasoning,
    Retrying,
    ThinkingCapped,
    ToolCallStarted,
    ToolResult,
    TurnDoneFrame,
    TurnEvent,
    Waiting,
    WireError,
)

__all__ = ["Renderer"]

DIM = "\x1b[2m"
RESET = "\x1b[0m"
CLEAR_LINE = "\r\x1b[K"


class Renderer:
    """Turns one chat's events into terminal text. `tty`: stdout is a terminal (live lines,
    erasing); `color`: ANSI styles may be used (a TTY without NO_COLOR)."""

    def __init__(self, *, tty: bool, color: bool, width: int = 80) -> None:
        self.tty = tty
        self.color = color
        self.width = max(width, 20)
        self._reset_turn()

    def _reset_turn(self) -> None:
        self._column = 0  # characters on the current line
        self._reasoning = False  # inside reasoning text
        self._progress = False  # a live progress line is showing
        self._attempt = ""  # text the current completion attempt has shown

    def event(self, event: TurnEvent) -> str:
        match event:
            case Content(text=text):
                return self._text(text, reasoning=False)
            case Reasoning(text=text):
                return self._text(text, reasoning=True)
            case Progress(total=total, cache=cache, processed=processed):
                if not self.tty:
                    return ""
                self._progress = True
                line = f"[prompt {processed}/{total} tokens, {cache} from the cache]"
                return CLEAR_LINE + self._dim(line)
            case ToolCallStarted(name=name):
                out = self._break_line()
                self._attempt = ""
                self._column = len(name) + 7
                return out + self._dim(f"[tool] {name}")
            case ToolResult(truncated=truncated):
                self._column = 0
                return (
                    self._dim(" ... done" + (", cut to the size limit" if truncated else "")) + "\n"
                )
            case Retrying(attempt=attempt, after_ms=after_ms, error=error):
                out = self._take_back()
                return out + self._status(
                    f"retrying (attempt {attempt}) in {after_ms / 1000:g} s: {error}"
                )
            case Queued(ahead=ahead):
                return self._status(f"queued behind {ahead} request{'s' if ahead != 1 else ''}")
            case Waiting(slot_busy=slot):
                return self._status(
                    f"waiting: the server's slot {slot} is busy with another client"
                )
            case ThinkingCapped(tokens=tokens):
                return self._status(f"thinking capped at {tokens} tokens")
            case CacheLoss(expected=expected, got=got):
                return self._status(
                    f"cache: the server reused {got} of {expected} prompt tokens; "
                    "it recomputed the rest"
                )
            case EpochStart(epoch=epoch, carried_turns=carried, summary_tokens=tokens):
                summary = f"a summary of {tokens} tokens" if tokens else "no summary"
                turns = f"{carried} turn{'s' if carried != 1 else ''}"
                return self._status(
                    f"epoch {epoch}: the conversation goes on from {summary} and {turns} "
                    "carried over"
                )
            case Length(predicted_n=predicted):
                return self._status(f"the answer was cut at {predicted} tokens (max_tokens)")
        return ""

    def done(self, frame: TurnDoneFrame) -> str:
        out = self._break_line()
        self._reset_turn()
        return out

    def error(self, frame: WireError) -> str:
        """The line for stderr; what was shown of the turn is closed off first (see `end`)."""
        return f"error: {frame.code.value}: {frame.message}\n"

    def end(self) -> str:
        """Close whatever line the turn left open (before an error or a cancel)."""
        out = self._break_line()
        self._reset_turn()
        return out

    def _text(self, text: str, *, reasoning: bool) -> str:
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
