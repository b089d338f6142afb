"""What a line typed into `bxctl chat` means, and what bxctl answers itself. Pure.

A line is a message for the model, unless its first word is a `/word`: then it is one of
bxctl's chat commands, answered without a request (an unknown `/word` too, so a typo never
reaches the model). `//text` sends `/text`. A message may span lines: a paste (the terminal
marks it) or a block between two lines of `\"\"\"`.

Also here: the exit codes a script reads, one per way a turn can end.
"""

from __future__ import annotations

import re

from attrs import frozen

from ..proto import ErrorCode, Usage

__all__ = [
    "ACTS",
    "BLOCK",
    "COMMANDS",
    "EXIT_CANCELLED",
    "EXIT_CODES",
    "EXIT_CONNECTION_LOST",
    "EXIT_NO_LOOPD",
    "EXIT_OTHER",
    "EXIT_TOO_LONG",
    "EXIT_USAGE",
    "BlockReader",
    "Command",
    "Message",
    "TurnFigures",
    "Unknown",
    "block_open",
    "help_text",
    "interpret",
    "stats_text",
]

BLOCK = '"""'

COMMANDS = {
    "/help": "this list",
    "/new": "start a new session (the old one stays on disk)",
    "/new-epoch": "the next message opens a new epoch (a summary and the newest turns go on)",
    "/fork": "go on in a new session of this one's turns (/fork N: its first N)",
    "/undo": "take back the last turn's changes to the workspace (a preview first)",
    "/rewind": "take back the changes from turn N on (/rewind N)",
    "/mode": "set the session's mode: read-only, ask or auto (/mode ask)",
    "/plan": "a read-only turn that plans MESSAGE, then asks whether to carry it out",
    "/attach": "attach a file (a text, a PDF or an image) to the next message (/attach PATH)",
    "/stats": "the last turn's tokens, cache reuse and time",
    "/sessions": "the sessions, the most recent first (bxctl sessions)",
    "/memory": "the notes the agent keeps (bxctl memory ls)",
    "/schedules": "the turns that run at their time (bxctl schedule ls)",
    "/quit": "leave (so do Ctrl-D, and Ctrl-C at the prompt)",
}

ACTS = ("/undo", "/rewind", "/mode", "/plan", "/attach")  # the owner's acts (undo_command)

# Exit codes: 0 the turn was done; one code per way it was not. Documented in the README.
EXIT_OTHER = 1  # an error code this bxctl does not know (a newer loopd)
EXIT_USAGE = 2  # bad arguments or session id (argparse's own code too)
EXIT_NO_LOOPD = 3  # nobody listens on the socket, or it is not ours to use
EXIT_CONNECTION_LOST = 4  # loopd closed the connection mid-turn or sent what is not a frame
EXIT_TOO_LONG = 5  # the message is over what one frame may carry
EXIT_CANCELLED = 130  # Ctrl-C cancelled the turn (128 + SIGINT, as shells count)
EXIT_CODES = {
    ErrorCode.BAD_FRAME: 10,
    ErrorCode.INTERNAL: 11,
    ErrorCode.INFERENCE: 12,
    ErrorCode.SESSION_FULL: 13,
    ErrorCode.TURN_LIMIT: 14,
    ErrorCode.SESSION_BUSY: 15,
    ErrorCode.NO_SUCH_SESSION: 16,
    ErrorCode.SESSION_EXISTS: 17,
    ErrorCode.BREAK_HARD: 18,
    ErrorCode.CANCELLED: 19,
    ErrorCode.NO_SUCH_APPROVAL: 20,
    ErrorCode.STOPPED: 21,
    ErrorCode.INTERRUPTED: 22,
    ErrorCode.TOO_MANY_WATCHES: 23,
    ErrorCode.CANNOT_UNDO: 24,
    ErrorCode.FILE_REFUSED: 25,
}

_COMMAND = re.compile(r"/[A-Za-z][A-Za-z0-9_-]*")


@frozen
class Message:
    """Text for the model."""

    text: str


@frozen
class Command:
    """One of `COMMANDS`, with what followed it on the line."""

    name: str
    rest: str


@frozen
class Unknown:
    """A `/word` that is no command."""

    word: str


def interpret(text: str) -> Message | Command | Unknown | None:
    """What a submitted text asks for; None for nothing at all (blank).

    A `\"\"\"` block is unwrapped to its inner lines; trailing newlines of a paste are dropped.
    """
    if not text.strip():
        return None
    if block_open(text) or _closed_block(text):
        inner = text.split("\n")[1:]
        if inner and inner[-1].strip() == BLOCK:
            inner.pop()
        body = "\n".join(inner)
        return Message(body) if body.strip() else None
    stripped = text.strip()
    if stripped.startswith("//"):
        return Message(text.lstrip()[1:].rstrip("\n"))
    word, _, rest = stripped.partition(" ")
    if "\n" not in word and _COMMAND.fullmatch(word):
        return Command(word, rest.strip()) if word in COMMANDS else Unknown(word)
    return Message(text.rstrip("\n"))


def block_open(text: str) -> bool:
    """Whether `text` is a `\"\"\"` block still waiting for its closing line."""
    lines = text.split("\n")
    return lines[0].strip() == BLOCK and not (len(lines) > 1 and lines[-1].strip() == BLOCK)


def _closed_block(text: str) -> bool:
    lines = text.rstrip("\n").split("\n")
    return len(lines) > 1 and lines[0].strip() == BLOCK and lines[-1].strip() == BLOCK


class BlockReader:
    """Lines read one at a time (piped stdin) gathered into texts: a line is a text, and so is
    everything from a `\"\"\"` line to the next."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def feed(self, line: str) -> str | None:
        """One line (without its newline); a whole text when one is complete, else None."""
        if not self._lines and line.strip() != BLOCK:
            return line
        self._lines.append(line)
        text = "\n".join(self._lines)
        if block_open(text):
            return None
        self._lines = []
        return text

    def pending(self) -> str | None:
        """A block cut off by the end of the input, as it stands."""
        text, self._lines = "\n".join(self._lines), []
        return text or None


def help_text() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, what in COMMANDS.items()]
    return "\n".join(
        [
            "Type a message and press Enter. Commands:",
            *lines,
            'A paste is one message whatever its lines; so is a block between two """ lines.',
            "Alt-Enter starts a new line; up and down recall earlier messages; // sends a /.",
            "While a turn runs, type a message: Enter queues it (the model reads it after its",
            "current step); Ctrl-C, then Enter, sends it instead of the answer, which stops;",
            "Ctrl-C with nothing typed cancels the turn.",
        ]
    )


@frozen
class TurnFigures:
    """What bxctl saw of one turn: the server's figures and its own clock."""

    usage: Usage
    seconds: float
    first_text: float | None  # seconds until the answer (or reasoning) began
    tool_calls: int


def stats_text(figures: TurnFigures | None) -> str:
    if figures is None:
        return "no turn yet in this chat"
    usage = figures.usage
    prompt = usage.cache_n + usage.prompt_n
    reuse = f" ({100 * usage.cache_n // prompt}%)" if prompt else ""
    began = (
        "" if figures.first_text is None else f"; the answer began after {figures.first_text:.1f} s"
    )
    reasoning = f" ({usage.reasoning_tokens} of them reasoning)" if usage.reasoning_tokens else ""
    capped = "; thinking was capped" if usage.thinking_capped else ""
    lines = [
        f"last turn: {figures.seconds:.1f} s{began}",
        f"  prompt: {prompt} tokens, {usage.cache_n} reused from the cache{reuse}, "
        f"{usage.prompt_n} processed",
        f"  answer: {usage.predicted_n} token{'s' if usage.predicted_n != 1 else ''}"
        f"{reasoning}{capped}",
    ]
    if figures.tool_calls:
        calls = f"{figures.tool_calls} tool call{'s' if figures.tool_calls != 1 else ''}"
        lines.append(f"  {calls}; the token figures are the turn's last completion's")
    return "\n".join(lines)
