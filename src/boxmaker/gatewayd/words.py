"""The gateway's own words: the owner's it reads itself (its commands, the answers to a
question, by a reply's words or a reaction) and those it writes (a question, a turn's end, a
tool's line, what became of a file), every piece of another's text in them made visible (no
control character, no mark that turns text around) and bounded. Pure."""

from __future__ import annotations

import unicodedata

from ..proto import Answer, ApprovalNeeded, ErrorCode, FileOffer, WireError

__all__ = [
    "COMMANDS",
    "HELP",
    "answer_in",
    "answer_text",
    "dropped",
    "ended",
    "ended_as",
    "file_name",
    "question",
    "too_many_waiting",
    "tool_line",
    "visible",
    "waits",
]

DETAIL_CHARS = 6_000  # of a call's detail in a question (brokerd's holds at most 8,192)
# What a reader cannot see, or that turns text around or breaks a line where none shows:
# controls (but a newline and a tab, in an answer), format characters (bidi marks, zero-width
# spaces, tags), line and paragraph separators, private and unassigned code points.
_UNSEEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"})
_JOINERS = frozenset({"\u200c", "\u200d"})  # the joiners scripts and emoji sequences need
# Letters and marks that show as nothing (Unicode's default ignorables outside the above).
_BLANK = frozenset({"\u034f", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u3164", "\uffa0"})

COMMANDS = ("!new", "!stop", "!sessions", "!help")

HELP = """\
This room is a conversation with your agent; write to it as you would in bxctl chat.
- `!new`: start a new conversation in this room (the old one is kept)
- `!stop`: stop the turn that is running
- `!sessions`: this room's conversations
- `!help`: this text

A question from the agent (a tool that needs your approval) is answered by a reply to it: `y`
(once), `s` (for this conversation), `a` (always), `n` (no); or a reaction: 👍 once, ❌ no."""

_WORDS = {
    Answer.ONCE: ("y", "yes", "once", "ok", "allow", "👍"),
    Answer.SESSION: ("s", "session"),
    Answer.ALWAYS: ("a", "always"),
    Answer.DENY: ("n", "no", "deny", "❌", "👎"),
}
_VARIATIONS = {chr(c) for c in range(0xFE00, 0xFE10)} | {chr(c) for c in range(0x1F3FB, 0x1F400)}


def answer_in(words: str) -> Answer | None:
    """The answer `words` give (a reply's text or a reaction's key), or None for none."""
    said = "".join(ch for ch in words.strip().lower() if ch not in _VARIATIONS).rstrip(".!")
    for answer, forms in _WORDS.items():
        if said in forms:
            return answer
    return None


def _unseen(ch: str) -> bool:
    return ch in _BLANK or unicodedata.category(ch) in _UNSEEN


def _escaped(ch: str) -> str:
    return f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}"


def visible(text: str, most: int = 300, *, lines: bool = False) -> str:
    """`text` with every character a reader cannot see as an escape (`\\u001b`, `\\u202e`,
    `\\u200b`), newlines and tabs too unless `lines`, at most `most` characters (what is cut,
    said)."""
    kept = "\n" if lines else ""
    head = text[:most]
    shown = "".join(_escaped(ch) if ch not in kept and _unseen(ch) else ch for ch in head)
    return shown if len(text) <= most else f"{shown}… [{len(text) - most:,} more characters]"


def answer_text(text: str) -> str:
    """The model's answer as posted: what `visible` escapes, but newlines, tabs and the
    joiners (the same piece by piece as whole: each character on its own)."""
    return "".join(
        _escaped(ch) if ch not in "\n\t" and ch not in _JOINERS and _unseen(ch) else ch
        for ch in text
    )


def tool_line(name: str, summary: str = "") -> str:
    """A tool call's line: the tool, and the call in short when loopd gave it."""
    said = f" — {visible(summary, 120)}" if summary else ""
    return f"⚙ {visible(name, 120)}{said}"


def question(needed: ApprovalNeeded) -> str:
    """The question of a call that needs the owner, with every argument (in a code block)."""
    lines = [f"**The agent asks to run** `{visible(needed.tool, 120)}`: {_code(needed.summary)}"]
    if needed.detail:
        lines += [
            "```",
            visible(needed.detail, DETAIL_CHARS, lines=True).replace("```", "'''"),
            "```",
        ]
    if needed.only_once:  # the conversation's ask mode: no grant is kept
        lines.append("Reply `y` (once) or `n` (no); or react 👍 or ❌. (The session asks each.)")
    else:
        lines.append(
            "Reply `y` (once), `s` (this conversation), `a` (always) or `n` (no); "
            "or react 👍 or ❌."
        )
    return "\n".join(lines)


def _code(text: str) -> str:
    return "`" + visible(text.replace("\n", " "), 300).replace("`", "'") + "`"


_ENDS = {
    ErrorCode.STOPPED.value: "Stopped.",
    ErrorCode.INTERRUPTED.value: (
        "The agent restarted while this ran; it was not run again. Send it anew to retry."
    ),
}


def ended(error: WireError) -> str:
    """What the owner is told of a turn that ended without its answer (its final frame)."""
    if (said := _ENDS.get(error.code.value)) is not None:
        return said
    if error.code is ErrorCode.FILE_REFUSED:  # before anything of the turn was kept
        return (
            f"Not taken: {visible(error.message, 600)}. Nothing ran: send the message again "
            "(its files do not wait any more)."
        )
    return f"The turn ended with an error ({error.code.value}): {visible(error.message, 600)}"


def ended_as(outcome: str) -> str:
    """The same, from the outcome loopd recorded (a `duplicate`'s)."""
    return _ENDS.get(outcome) or f"This message's turn ended: {visible(outcome, 60)}."


def file_name(name: str) -> str:
    """A file's name as the gateway writes it: in code, visible, bounded."""
    return "`" + visible(name, 120).replace("`", "'") + "`"


def waits(offer: FileOffer) -> str:
    """A file that came without a caption, taken: it waits for the owner's next message."""
    return (
        f"Got {file_name(offer.name)} ({visible(offer.media_type, 60)}, {offer.size:,} bytes): "
        "it goes with your next message."
    )


def dropped(name: str) -> str:
    """A file that waited too long for a message (`sent_files.WAIT_MS`)."""
    return (
        f"{file_name(name)} waited over an hour for a message and was dropped; "
        "send it again to ask about it."
    )


def too_many_waiting(name: str, most: int) -> str:
    return (
        f"{most} files wait for your next message already, as many as one message carries "
        f"([files] max_files): {file_name(name)} was not taken. Send your message first."
    )
