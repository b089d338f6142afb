"""Rules for `shell` by command prefix, as Codex's are: `[[grants.shell.prefixes]]` in the
policy, each a prefix of words and a decision (`prefix = ["git", "push"]`, `decision = "ask"`).
Pure.

A command is read as the shell would split it (`shlex`, quotes kept together) into simple
commands at its control operators (`;`, `&`, `&&`, `|`, `||`, parentheses, newlines). Each simple
command, its leading `NAME=value` words aside, takes the decision of the longest prefix rule it
starts with, else the tool's grant; the command takes the strictest of them (deny, then ask,
then allow). What cannot be read so (unbalanced quotes, `$(...)`, backquotes, process
substitution, here-documents) could hide any command: it takes the strictest of the grant and
every rule. The sandbox bounds what a command can do either way; the rules only say which
commands the owner wants to see first.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from attrs import frozen

from ._toml import Decision

__all__ = ["PrefixRule", "decide_command", "simple_commands"]

_STRICTNESS = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}
_OPERATORS = frozenset({";", "&", "&&", "|", "||", "(", ")", ";;", "|&", "\n"})
_HIDDEN = ("$(", "`", "<(", ">(", "<<")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


@frozen
class PrefixRule:
    prefix: tuple[str, ...]
    decision: Decision


def simple_commands(command: str) -> list[list[str]] | None:
    """The words of each simple command of `command`, or None when it cannot be read so."""
    if any(hidden in command for hidden in _HIDDEN):
        return None
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError:  # no closing quotation
        return None
    found: list[list[str]] = [[]]
    for word in words:
        if word in _OPERATORS:
            found.append([])
        elif set(word) <= set(";&|()"):  # an operator shlex joined, such as ";&"
            return None
        else:
            found[-1].append(word)
    return [_without_assignments(words) for words in found if _without_assignments(words)]


def _without_assignments(words: list[str]) -> list[str]:
    at = 0
    while at < len(words) and _ASSIGNMENT.fullmatch(words[at]):
        at += 1
    return words[at:]


def decide_command(
    rules: Sequence[PrefixRule], grant: Decision, command: str
) -> tuple[Decision, str | None]:
    """The decision for `command`, and which rule gave it (None: the tool's grant)."""
    commands = simple_commands(command)
    if commands is None:
        strictest = max(rules, key=lambda r: _STRICTNESS[r.decision], default=None)
        if strictest is None or _STRICTNESS[strictest.decision] <= _STRICTNESS[grant]:
            return grant, None
        return strictest.decision, f"{_shown(strictest)}: the command has parts no rule can read"
    decided: list[tuple[Decision, str | None]] = []
    for words in commands:
        matches = [r for r in rules if tuple(words[: len(r.prefix)]) == r.prefix]
        best = max(matches, key=lambda r: len(r.prefix), default=None)
        decided.append((best.decision, _shown(best)) if best is not None else (grant, None))
    return max(decided, key=lambda pair: _STRICTNESS[pair[0]], default=(grant, None))


def _shown(rule: PrefixRule) -> str:
    return f"the rule for {shlex.join(rule.prefix)!r}"
