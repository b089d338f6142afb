"""The words of a shell line as bash reads them, where tree-sitter-bash cannot be trusted to:
quote removal, what bash would expand, and the marks of a line the parser reads otherwise than
bash does. Pure; each in time linear in its text (a line is a hostile input).
"""

from __future__ import annotations

import re

__all__ = [
    "CODE_VARIABLES",
    "differs",
    "evaluating",
    "is_code_variable",
    "plain_delimiter",
    "unquoted",
]

# Variables whose values bash runs, evaluates or looks commands up in.
CODE_VARIABLES = frozenset((
    "BASH_ENV", "ENV", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "SHELLOPTS",
    "BASHOPTS", "BASH_CMDS", "BASH_ALIASES", "BASH_LOADABLES_PATH",
))  # names, packed # fmt: skip

# Characters bash reads otherwise than the parser: a carriage return, a vertical tab and a
# form feed are a word's to bash and blanks to tree-sitter-bash; no other control has a
# meaning in a command line.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NAMED_FD = re.compile(r"(?<!\$)\{[A-Za-z_][A-Za-z0-9_]*\[")  # `{a[...]}>`: index evaluated
_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OFFSET = re.compile(r"\$\{#?[A-Za-z_0-9@*!]*(\[[^]]*\])?:[^-=?+]")


def differs(line: str) -> str | None:
    """Why tree-sitter-bash may read `line` otherwise than bash does, or None."""
    if _CONTROLS.search(line):
        return "a control character the parser reads otherwise than bash"
    if "\\\n" in line:
        return "a line continuation (a backslash before a newline), read otherwise by the parser"
    if _NAMED_FD.search(line):
        return "a redirection to a named descriptor with a subscript, which is arithmetic"
    return None


def is_code_variable(name: str) -> bool:
    """Whether bash runs, or looks commands up in, the value of the variable `name`."""
    return name in CODE_VARIABLES or name.startswith("BASH_FUNC_")


def evaluating(text: str) -> bool:
    """Whether the `${...}` expansion `text` evaluates what a variable holds: a prompt (`@P`,
    whose command substitutions run), a reference (`${!x}`: a name, a subscript's index
    evaluated) or an offset (`${x:i}`: arithmetic). Only its ends are read."""
    head = text[:300]
    return text.endswith("@P}") or head.startswith("${!") or bool(_OFFSET.match(head))


def plain_delimiter(text: str) -> tuple[str, bool] | None:
    """A heredoc's delimiter as bash reads it, and whether it is quoted (its body is then
    data); None when it is not one the parser reads as bash does (`E'F'`, `$'E'`)."""
    if _PLAIN.fullmatch(text):
        return text, False
    if len(text) > 2 and text[0] == text[-1] and text[0] in "'\"":
        word = text[1:-1]
        return (word, True) if _PLAIN.fullmatch(word) else None
    if text.startswith("\\") and _PLAIN.fullmatch(text[1:]):
        return text[1:], True
    return None


def unquoted(text: str) -> str | None:
    """`text` with bash's quote removal; None when bash would expand it (a `$`, a backquote, a
    glob, braces with a comma or `..`, an extended glob's parenthesis, a leading tilde)."""
    if text.startswith("~"):
        return None  # the home: a variable the line may have set
    last_close = text.rfind("]")
    out: list[str] = []
    braces = False  # an unquoted `{` is open
    at, end = 0, len(text)
    while at < end:
        char = text[at]
        if char == "\\":
            if at + 1 < end and text[at + 1] != "\n":
                out.append(text[at + 1])
            at += 2
        elif char == "'":
            close = text.find("'", at + 1)
            if close < 0:
                return None
            out.append(text[at + 1 : close])
            at = close + 1
        elif char == '"':
            closing = _double(text, at + 1, out)
            if closing is None:
                return None
            at = closing + 1
        elif char in "$`*?(" or (char == "[" and at < last_close):
            return None
        elif braces and (char == "," or text.startswith("..", at)):
            return None  # {a,b} or {1..3}: brace expansion
        else:
            braces = (braces or char == "{") and char != "}"
            out.append(char)
            at += 1
    return "".join(out)


def _double(text: str, at: int, out: list[str]) -> int | None:
    """Read a double-quoted part from `at` (after its quote) into `out`; where its closing quote
    is, or None when it holds an expansion or does not close."""
    end = len(text)
    while at < end and text[at] != '"':
        if text[at] in "$`":
            return None
        if text[at] == "\\" and at + 1 < end and text[at + 1] in '$`"\\\n':
            out.append("" if text[at + 1] == "\n" else text[at + 1])
            at += 2
            continue
        out.append(text[at])
        at += 1
    return at if at < end else None


def names_assigned(command: str, words: tuple[str | None, ...]) -> list[str | None]:
    """The variables a builtin that assigns by name sets (`read a b`, `printf -v a`, `getopts
    s name`, `wait -p name`): each a name, or None when no reading can know it."""
    args = list(words[1:])
    if command == "printf" or command == "wait":
        flag = "-v" if command == "printf" else "-p"
        for at, word in enumerate(args):
            if word is None:
                return [None]
            if word == flag:
                return args[at + 1 : at + 2] or [None]
            if word.startswith(flag):
                return [word[len(flag) :]]
            if not word.startswith("-"):
                return []
        return []
    if command == "getopts":
        return args[1:2]
    # read: its names (its options' values among them, read as names too)
    return [word for word in args if word is None or not word.startswith("-")]


def is_name(word: str | None) -> bool:
    return word is not None and bool(_NAME.fullmatch(word))
