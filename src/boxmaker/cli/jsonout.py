"""`bxctl chat --json`: every frame as one line on stdout, for scripts. Pure.

Each line is a frame as it came on `loop.sock` (`{"kind", "final", "body"}`), so its type is
its `kind` and the last line of a turn says `"final": true`. bxctl adds frames of its own in
the same shape: `session` (the session the next turns go to, once loopd is known to be
there) and `error` with codes of its own for what went wrong before loopd could answer
(`no_loopd`, `connection_lost`, `too_long`, `cancelled`). Nothing else is ever written to
stdout in this mode.

`--json=lines` batches `content` and `reasoning` events: one event per line of text instead
of one per token; the text of a line that is still open is written before any other frame.
"""

from __future__ import annotations

from typing import Literal

from ..channel import encode_frame, split_frame
from ..proto import Content, Frame, Reasoning, TurnEventFrame, encode

__all__ = ["Batching", "JsonOut"]

Batching = Literal["events", "lines"]


class JsonOut:
    def __init__(self, batching: Batching = "events") -> None:
        self.batching = batching
        self._kind: type[Content] | type[Reasoning] | None = None
        self._text = ""

    def frame(self, frame: Frame) -> str:
        """The lines to write for a frame from loopd (none while a line of text is open)."""
        if self.batching == "lines" and isinstance(frame, TurnEventFrame):
            event = frame.event
            if isinstance(event, Content | Reasoning):
                out = self.flush() if type(event) is not self._kind else ""
                self._kind = type(event)
                self._text += event.text
                head, newline, self._text = self._text.rpartition("\n")
                if newline:
                    out += "".join(self._event(line + "\n") for line in head.split("\n"))
                return out
        return self.flush() + _lines(frame)

    def flush(self) -> str:
        """The open line of text, if any, as one event."""
        text, self._text = self._text, ""
        return self._event(text) if text else ""

    def _event(self, text: str) -> str:
        assert self._kind is not None
        return _lines(TurnEventFrame(self._kind(text)))

    def session(self, session: str) -> str:
        return _line("session", False, {"session": session})

    def error(self, code: str, message: str) -> str:
        """A final `error` frame of bxctl's own (loopd's come through `frame`)."""
        return self.flush() + _line("error", True, {"code": code, "message": message})


def _line(kind: str, final: bool, body: dict[str, object]) -> str:
    return encode({"kind": kind, "final": final, "body": body}).decode() + "\n"


def _lines(frame: Frame) -> str:
    """`frame` as the lines loopd sent it: a text too long for one frame in several (the
    channel client joins a long answer's `turn_done_part`s; here they are parts again)."""
    return "".join(encode_frame(part).decode() for part in split_frame(frame))
