"""What the owner is shown of a call that asks them: one line, the tool and what it would do
(a path as it lands, a command or a cell whole, an MCP call's arguments whole), then why it
is asked when that is not its grant; and the `detail`, every argument (docs/protocol.md,
"The detail of a call"). Pure; control characters escaped (`_walk.clean`).
"""

from __future__ import annotations

from typing import Any

from ..proto import encode
from ..tools import SANDBOXED_TOOLS
from ._walk import clean
from .policy import Verdict

__all__ = ["MOST_DETAIL", "SHOWN_WHOLE", "detail", "question"]

SANDBOXED = frozenset(tool.name for tool in SANDBOXED_TOOLS)

SHOWN_WHOLE = 4000  # characters of a command or a cell the owner is shown when asked
MOST_DETAIL = 8192  # characters of a detail, at most
_SHOWN_ARGUMENTS = 40  # arguments shown with their values (flags always)
_NAME = 64  # characters of an argument's name
_VALUES = 6000  # characters the values share
_VALUE = 240  # characters a value may take, however many share


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


def detail(arguments: dict[str, Any]) -> str:
    """Every argument of a call, a line each (`name: value`, a flag first): a string as its
    text, another value as JSON; a long one as its head, its tail and its length; a line of a
    value after its first indented two spaces, so no value can pass for another argument."""
    items = sorted(arguments.items(), key=lambda item: type(item[1]) is not bool)
    shown = [item for item in items if type(item[1]) is bool]
    shown += [item for item in items if type(item[1]) is not bool][:_SHOWN_ARGUMENTS]
    budget = max(_VALUE, _VALUES // max(1, len(shown)))
    lines = [f"{_name(name)}: {_value(value, budget)}" for name, value in shown]
    if len(shown) < len(items):
        rest = ", ".join(_name(name) for name, _ in items[len(shown) :])
        lines.append(f"[{len(items) - len(shown)} more arguments, their values not shown: "
                     f"{_head_tail(rest, _VALUE)}]")  # fmt: skip
    text = "\n".join(lines)
    return text if len(text) <= MOST_DETAIL else _head_tail(text, MOST_DETAIL)


def _name(name: str) -> str:
    name = clean(name)
    return name if len(name) <= _NAME else f"{name[: _NAME - 1]}…"


def _value(value: object, budget: int) -> str:
    text = value if isinstance(value, str) else encode(value).decode()
    return "\n  ".join(clean(line) for line in _head_tail(text, budget).split("\n"))


def _head_tail(text: str, budget: int) -> str:
    """`text`, or its head and its tail saying how long it is and how much is not shown."""
    if len(text) <= budget:
        return text
    said = f"\n… [{len(text):,} characters in all; the {len(text):,} between not shown] …\n"
    room = max(0, budget - len(said))
    head, tail = room * 2 // 3, room // 3
    left = len(text) - head - tail
    said = f"\n… [{len(text):,} characters in all; the {left:,} between not shown] …\n"
    return f"{text[:head]}{said}{text[len(text) - tail :]}"
