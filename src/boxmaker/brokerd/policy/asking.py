"""What the owner is shown of a call that asks them: one line, the tool and what it would do
(a path as it lands, a command or a cell whole, an MCP call's arguments whole), then why it
is asked when that is not its grant; and the `detail`, every argument (docs/protocol.md,
"The detail of a call"). Pure; control characters escaped (`_walk.clean`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ...proto import encode
from ..files._walk import clean
from ..registry import SANDBOXED, server_of
from .rules import Verdict

__all__ = ["MOST_DETAIL", "SHOWN_WHOLE", "detail", "question"]

SHOWN_WHOLE = 4000  # characters of a command or a cell the owner is shown when asked
MOST_DETAIL = 8192  # characters of a detail, at most
_SHOWN_ARGUMENTS = 24  # arguments shown with their values; the others named
_NAME = 64  # characters of an argument's name
_LINES = 12  # lines of one value
_REST = 400  # characters kept for the names of the arguments not shown
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


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
    if server_of(tool) is not None or verdict.note:  # an MCP tool's, or asked for its egress
        return f"{tool} {_whole(encode(arguments).decode())}"
    return f"{tool} {shown if len(shown) <= 80 else shown[:77] + '...'}"


def _whole(text: str) -> str:
    """`text` escaped, up to `SHOWN_WHOLE` characters, a cut said."""
    text = clean(text)
    if len(text) <= SHOWN_WHOLE:
        return text
    return f"{text[:SHOWN_WHOLE]} [CUT: {len(text) - SHOWN_WHOLE:,} more characters not shown]"


def detail(arguments: dict[str, Any], declared: Sequence[str] = (), change: str = "") -> str:
    """Every argument of a call, a line each (`name: value`): those the tool's schema
    `declared` first, in its order, then flags (`true`, `false`), then the rest. A string is
    its text, another value JSON; a long one is its head, its tail and its length; a line of a
    value after its first is indented two spaces, so no value can pass for another argument.
    At most `MOST_DETAIL` characters by construction: `_SHOWN_ARGUMENTS` share the room, and
    the names of any more are listed after them. `change`, a file tool's diff of what it
    would write, follows them under `change:`, its lines indented, its middle left out past
    two thirds of the room (the arguments have the rest)."""
    if change:
        lines = detail_lines(arguments, declared, MOST_DETAIL // 3)
        room = MOST_DETAIL - len(lines) - len(_CHANGE) - 1
        return f"{lines}\n{_CHANGE}\n{_diff(change, room)}"
    return detail_lines(arguments, declared, MOST_DETAIL)


_CHANGE = "change (a unified diff):"


def _diff(change: str, room: int) -> str:
    """The diff's lines, each indented and cleaned, within `room` characters: its head and
    its tail, and a line saying how many lines were left out between them."""
    lines = ["  " + clean(line) for line in change.rstrip("\n").split("\n")]
    whole = "\n".join(lines)
    if len(whole) <= room:
        return whole
    said = "  … [{} lines of the change not shown] …"
    room -= len(said) + 8
    head = _take_lines(lines, room * 2 // 3)
    tail = _take_lines(lines[len(head) :][::-1], room - sum(len(x) + 1 for x in head))[::-1]
    left = len(lines) - len(head) - len(tail)
    return "\n".join([*head, said.format(left), *tail])


def _take_lines(lines: list[str], room: int) -> list[str]:
    """The first of `lines` whose sum, a newline after each, is within `room`, none cut."""
    taken: list[str] = []
    for line in lines:
        room -= len(line) + 1
        if room < 0:
            break
        taken.append(line)
    return taken


def detail_lines(arguments: dict[str, Any], declared: Sequence[str], most: int) -> str:
    """The arguments of `detail`, in at most `most` characters."""
    first = [name for name in declared if name in arguments]
    flags = [n for n in arguments if n not in first and type(arguments[n]) is bool]
    order = first + flags + [n for n in arguments if n not in first and n not in flags]
    shown, rest = order[:_SHOWN_ARGUMENTS], order[_SHOWN_ARGUMENTS:]
    share = (most - _REST - len(shown)) // max(1, len(shown))  # a newline after each
    lines = []
    for name in shown:
        label = f"{_name(name)}: "
        lines.append(label + _value(arguments[name], share - len(label)))
    if rest:
        names = _cut(", ".join(_name(name) for name in rest), _REST - 80)
        lines.append(f"[{len(rest)} more arguments, their values not shown: {names}]")
    return "\n".join(lines)


def _name(name: str) -> str:
    """An argument's name as shown: plain when it is a plain name, else quoted as JSON (so a
    name cannot read as another argument's line: `"path: ~/.ssh"`), at most `_NAME`."""
    if not _PLAIN.fullmatch(name):
        name = json.dumps(name)  # controls and every non-ASCII character escaped
    return name if len(name) <= _NAME else f"{name[: _NAME - 1]}…"


def _value(value: object, room: int) -> str:
    """`value` in at most `room` characters and `_LINES` lines, its later lines indented: whole,
    or its first lines, a line saying how long it is, and its last lines."""
    text = value if isinstance(value, str) else encode(value).decode()
    lines = [clean(line) for line in text.split("\n")]
    whole = "\n  ".join(lines)
    if len(whole) <= room and len(lines) <= _LINES:
        return whole
    count = f"{len(lines):,} lines" if len(lines) > 1 else "1 line"
    said = f"… [{len(text):,} characters in all, {count}; the middle not shown] …"
    room -= len(said) + 3 * _LINES  # what the shown lines may take, their newlines apart
    head = _take(lines, room * 2 // 3, _LINES * 2 // 3)
    tail = [
        line[::-1]
        for line in _take(
            [line[::-1] for line in reversed(lines)], room - room * 2 // 3, _LINES // 3 - 1
        )
    ][::-1]
    return "\n  ".join([*head, said, *tail])


def _take(lines: list[str], room: int, most: int) -> list[str]:
    """The first of `lines` (at most `most`) within `room` characters, the last one cut."""
    taken: list[str] = []
    for line in lines[:most]:
        if len(line) >= room:
            return [*taken, line[:room]] if room > 0 else taken
        taken.append(line)
        room -= len(line)
    return taken


def _cut(text: str, room: int) -> str:
    """`text`, or as much of it as `room` holds, the cut said."""
    return text if len(text) <= room else f"{text[: room - 12]}… (and more)"
