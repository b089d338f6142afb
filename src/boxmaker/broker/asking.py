"""What the owner is shown of a call that asks them: one line, the tool and what it would do
(a path as it lands, a command or a cell whole, an MCP call's arguments whole), then why it
is asked when that is not its grant. Pure; control characters escaped (`_walk.clean`).
"""

from __future__ import annotations

from typing import Any

from ..proto import encode
from ..tools import SANDBOXED_TOOLS
from ._walk import clean
from .policy import Verdict

__all__ = ["SHOWN_WHOLE", "question"]

SANDBOXED = frozenset(tool.name for tool in SANDBOXED_TOOLS)

SHOWN_WHOLE = 4000  # characters of a command or a cell the owner is shown when asked


def question(tool: str, arguments: dict[str, Any], verdict: Verdict) -> str:
    """One line of what a call would do, and why it is asked when that is not its grant."""
    said = _what(tool, arguments, verdict)
    return f"{said} [asked: {verdict.note}]" if verdict.note else said


def _what(tool: str, arguments: dict[str, Any], verdict: Verdict) -> str:
    """The tool, and its path (or its arguments, cut); a command or a cell whole (the owner
    approves what they see), up to `SHOWN_WHOLE`."""
    if verdict.located is not None:  # the model's path: no control character reaches a terminal
        return f"{tool} {clean(verdict.located.shown)}"
    if tool in SANDBOXED:
        return f"{tool}: {_whole(str(arguments.get('code', arguments.get('command', ''))))}"
    shown = clean(encode(arguments).decode())
    if "." in tool or verdict.note:  # an MCP tool's, or one asked for its egress: all of it
        return f"{tool} {_whole(encode(arguments).decode())}"
    return f"{tool} {shown if len(shown) <= 80 else shown[:77] + '...'}"


def _whole(text: str) -> str:
    """`text` escaped, up to `SHOWN_WHOLE` characters, a cut said."""
    text = clean(text)
    if len(text) <= SHOWN_WHOLE:
        return text
    return f"{text[:SHOWN_WHOLE]} [CUT: {len(text) - SHOWN_WHOLE:,} more characters not shown]"
