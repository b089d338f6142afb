"""The gateway's own words: the owner's it reads itself (its commands, the answers to a
question, by a reply's words or a reaction) and those it writes (a question, a turn's end, a
tool's line), every piece of another's text in them made visible (no control character, no
mark that turns text around) and bounded. Pure."""

from __future__ import annotations

import re

from ..proto import Answer, ApprovalNeeded, ErrorCode, WireError

__all__ = [
    "COMMANDS",
    "HELP",
    "answer_in",
    "ended",
    "question",
    "tool_line",
    "visible",
]

DETAIL_CHARS = 6_000  # of a call's detail in a question (brokerd's holds at most 8,192)
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

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


def visible(text: str, most: int = 300) -> str:
    """`text` with each control character and bidi mark as an escape (`\\x1b`, `\\u202e`),
    at most `most` characters (what is cut, said)."""
    shown = _HIDDEN.sub(lambda found: f"\\u{ord(found.group()):04x}", text[:most])
    return shown if len(text) <= most else f"{shown}… [{len(text) - most:,} more characters]"


def tool_line(name: str) -> str:
    return f"⚙ {visible(name, 120)}"


def question(needed: ApprovalNeeded) -> str:
    """The question of a call that needs the owner, with every argument (in a code block)."""
    lines = [f"**The agent asks to run** `{visible(needed.tool, 120)}`: {_code(needed.summary)}"]
    if needed.detail:
        lines += ["```", visible(needed.detail, DETAIL_CHARS).replace("```", "'''"), "```"]
    lines.append(
        "Reply `y` (once), `s` (this conversation), `a` (always) or `n` (no); or react 👍 or ❌."
    )
    return "\n".join(lines)


def _code(text: str) -> str:
    return "`" + visible(text.replace("\n", " "), 300).replace("`", "'") + "`"


def ended(error: WireError) -> str:
    """What the owner is told of a turn that ended without its answer."""
    if error.code is ErrorCode.STOPPED:
        return "Stopped."
    if error.code is ErrorCode.INTERRUPTED:
        return "The agent restarted while this ran; it was not run again. Send it anew to retry."
    return f"The turn ended with an error ({error.code.value}): {visible(error.message, 600)}"
