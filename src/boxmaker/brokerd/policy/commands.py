"""Rules for `shell` by command prefix, as Codex's are: `[[grants.shell.prefixes]]` in the
policy, each a prefix of words and a decision (`prefix = ["git", "push"]`, `decision = "ask"`).
Pure.

A line is read as bash reads it (`command_line.py`): every command it may run, wrappers and
`sh -c` texts followed. Each command takes the decision of the longest rule whose words it
starts with, word for word, else the tool's grant; then every stricter rule that could match it
raises it, unless a longer rule it matches overrides that one: a name given as a path
(`/bin/rm`) matches a rule on its last part, and an unknown word matches any words. So an allow
rule matches only a command known whole, while a deny rule matches its command whatever names
it (a path, a wrapper, a variable). The line takes the strictest of its commands, and at least
`ask` when they cannot all be known before it runs. The sandbox bounds what a command can do
either way; the rules say which commands the owner wants to see first, or never.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from attrs import Attribute, field, frozen

from ...proto import InvalidValue
from ._toml import Decision, shown
from .command_line import read_line
from .wrappers import Words

__all__ = ["Judgement", "PrefixRule", "decide_command"]

_STRICTNESS = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}


def _words(_instance: Any, attribute: Attribute[Any], prefix: tuple[str, ...]) -> None:
    if not prefix or not all(prefix):  # no words would match every command
        raise InvalidValue(f"expected words, got {shown(prefix)}", attribute.name)


@frozen
class PrefixRule:
    """A `[[grants.shell.prefixes]]` table, structured as it is (`parse.py`): a command that
    starts with `prefix`, word for word, takes `decision`."""

    prefix: tuple[str, ...] = field(validator=_words)
    decision: Decision


@frozen
class Judgement:
    """A line's decision; `rule` names the rule that gave it (a session answer never lifts a
    rule's), `why` says what could not be known when that alone made it `ask`."""

    decision: Decision
    rule: str | None = None
    why: str | None = None


def decide_command(rules: Sequence[PrefixRule], grant: Decision, command: str) -> Judgement:
    """The decision for the command line `command` under `rules` and the tool's grant."""
    reading = read_line(command)
    judged = None
    for words in reading.forms:
        decision, rule, exact = _decide(rules, grant, words)
        if (
            judged is None
            or _STRICTNESS[decision] > _STRICTNESS[judged.decision]
            or (rule is not None and judged.rule is None and decision is judged.decision)
        ):
            shown = _shown(rule) if rule is not None else None
            if rule is not None and not exact:
                shown = f"{shown}, which the line may run ({_how(words, reading.anything)})"
            judged = Judgement(decision, shown)
    if judged is None:  # it runs nothing (a comment, an empty line)
        judged = Judgement(grant)
    if reading.unknown is not None and judged.decision is Decision.ALLOW:
        return Judgement(Decision.ASK, why=f"what it runs cannot all be known: {reading.unknown}")
    return judged


def _decide(
    rules: Sequence[PrefixRule], grant: Decision, words: Words
) -> tuple[Decision, PrefixRule | None, bool]:
    """One command's decision, the rule that gave it, and whether that rule matched it word
    for word."""
    best = max(
        (r for r in rules if _starts(words, r.prefix)), key=lambda r: len(r.prefix), default=None
    )
    decision, by, exact = (grant, None, False) if best is None else (best.decision, best, True)
    for rule in rules:
        if _STRICTNESS[rule.decision] <= _STRICTNESS[decision]:
            continue
        if best is not None and best.prefix[: len(rule.prefix)] == rule.prefix:
            continue  # a longer rule the command matches overrides it
        if _could(words, rule.prefix):
            decision, by, exact = rule.decision, rule, False
    return decision, by, exact


def _starts(words: Words, prefix: tuple[str, ...]) -> bool:
    """Whether the command is known to start with `prefix`, word for word."""
    return len(words) >= len(prefix) and all(w == p for w, p in zip(words, prefix, strict=False))


def _could(words: Words, prefix: tuple[str, ...]) -> bool:
    """Whether the command may be one that starts with `prefix`: its name compared by its last
    part, an unknown word standing for any words (the rest of the prefix among them)."""
    for at, wanted in enumerate(prefix):
        if at >= len(words):
            return False
        word = words[at]
        if word is None:
            return True
        if (at == 0 and _name(word) != _name(wanted)) or (at > 0 and word != wanted):
            return False
    return True


def _name(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _how(words: Words, anything: str | None) -> str:
    if words[0] is None:
        return f"it may run any command: {anything}"
    if None in words:
        return f"{shlex.join(w for w in words if w is not None)} with words unknown"
    return f"as {shlex.join(w for w in words if w is not None)}"


def _shown(rule: PrefixRule) -> str:
    return f"the rule for {shlex.join(rule.prefix)!r}"
