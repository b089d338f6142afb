"""A `shell` command line read as bash reads it, with tree-sitter-bash: every command it may
run, as its words, and whether all of them can be known before it runs. Pure.

Every simple command is found wherever it stands (in a pipeline, a list, a subshell, a loop, a
function's body, a command or process substitution, a heredoc), its words read with bash's
quote removal (`r\\m`, `'r'm` and `"rm"` are `rm`). A word that holds an expansion
(`$x`, `${x@P}`, `$[x]`, `$(...)`, `{a,b}`, `$'...'`) is unknown: it may stand for any
words; a glob in a command's name is too. What a wrapper runs is a command of the line too
(`wrappers.py`), and so is each command of a shell's `-c` text, read the same way.

The line is *unknown* (its commands cannot all be known before it runs) when it holds an
unknown word anywhere, an assignment, a function, `exec`, or text bash runs as commands. It
*may run anything* (the words `RUNS_ANYTHING` are among its commands) when: a command's name is
unknown; it runs text (`eval`, `source`, `trap`, `alias`, `hash`, `let`, a shell reading a
script or its input, `env -S`, `sudo -s`); it evaluates arithmetic, which runs the command
substitutions in a variable's value (`(( ))`, `$(( ))`, `$[ ]`, a subscript, `[[ a -eq b ]]`,
`declare -i`); it names a variable with a subscript to a command that takes names (`read
'a[$(rm x)]'`); it sets a variable bash runs as code (`PS4`, `BASH_ENV`, `BASH_FUNC_*`); or it
cannot be read at all (a syntax tree-sitter-bash does not know, a line over `MOST_CHARS`, more
than `MOST_DEPTH` wrappers and texts within each other).
"""

from __future__ import annotations

import re

import tree_sitter_bash
from attrs import frozen
from tree_sitter import Language, Node, Parser

from .wrappers import RUNS_ANYTHING, Words, inner, shell_text

__all__ = ["MOST_CHARS", "MOST_DEPTH", "Reading", "read_line"]

MOST_CHARS = 65536
MOST_DEPTH = 8

_BASH = Language(tree_sitter_bash.language())

_EXPANSIONS = {
    "simple_expansion": "a parameter expansion",
    "expansion": "a parameter expansion",
    "command_substitution": "a command substitution",
    "process_substitution": "a process substitution",
    "arithmetic_expansion": "arithmetic",
    "ansi_c_string": "a $'...' string",
    "translated_string": 'a $"..." string',
    "brace_expression": "a brace expansion",
}
_RUNS_TEXT = frozenset({"eval", "source", ".", "trap", "alias", "hash", "enable", "bind",
                        "complete", "compgen", "fc", "let", "mapfile", "readarray"})  # fmt: skip
_TAKES_NAMES = frozenset({"read", "printf", "unset", "getopts", "wait", "test", "["})
_NAMED_BY_V = frozenset({"printf", "test", "["})  # they take a name only after -v
_CODE_VARIABLES = frozenset({"BASH_ENV", "ENV", "PS0", "PS1", "PS2", "PS3", "PS4",
                             "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS"})  # fmt: skip
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_BRACES = re.compile(r"\{[^}]*(,|\.\.)[^}]*\}")
# `${x@P}` (a prompt: its command substitutions run), `${!x}` (a name, a subscript's index
# evaluated), `${x:i}` (an offset: arithmetic)
_EVALUATES = re.compile(r"@P|^\$\{!|^\$\{#?[^}:]*:[^-=?+]")


@frozen
class Reading:
    """What a line may run (`forms`: each command as its words, `None` an unknown word), and
    why not all of it can be known before it runs (`unknown`; None when it can)."""

    forms: tuple[Words, ...]
    unknown: str | None
    anything: str | None = None  # why it may run any command, when it may


def read_line(line: str) -> Reading:
    """Every command `line` may run, and whether they can all be known."""
    reader = _Reader()
    reader.read(line, 0)
    return Reading(tuple(reader.forms), reader.unknown, reader.why_anything)


class _Reader:
    def __init__(self) -> None:
        self.forms: list[Words] = []
        self.unknown: str | None = None
        self.why_anything: str | None = None

    def not_known(self, why: str) -> None:
        if self.unknown is None:
            self.unknown = why

    def anything(self, why: str, *, add: bool = True) -> None:
        self.not_known(why)
        if self.why_anything is None:
            self.why_anything = why
        if add:
            self.forms.append(RUNS_ANYTHING)

    def read(self, line: str, depth: int) -> None:
        if len(line) > MOST_CHARS:
            return self.anything(f"a line over {MOST_CHARS} characters")
        if depth > MOST_DEPTH:
            return self.anything("commands within commands too deep to follow")
        tree = Parser(_BASH).parse(line.encode("utf-8", "surrogatepass"))
        if tree.root_node.has_error:
            return self.anything("a part the parser cannot read")
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            self.node(node, depth)
            stack.extend(reversed(node.children))
        return None

    def node(self, node: Node, depth: int) -> None:
        kind = node.type
        if kind == "command":
            self.command(node, depth)
        elif kind in _EXPANSIONS:
            self.not_known(_EXPANSIONS[kind])
        elif kind == "function_definition":
            self.not_known("a function")
        elif kind == "variable_assignment":
            self.not_known("a variable set")
            name = node.child_by_field_name("name")
            variable = _text(name) if name is not None else ""
            if variable in _CODE_VARIABLES or variable.startswith("BASH_FUNC_"):
                self.anything(f"{variable}, which bash runs as code")
        elif kind == "declaration_command":
            self.not_known("a variable declared")
        if (why := _evaluates(node)) is not None:
            self.anything(why)

    def command(self, node: Node, depth: int) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            return
        words: list[str | None] = [_word(name)]
        words += [_word(argument) for argument in node.children_by_field_name("argument")]
        self.form(tuple(words), depth)

    def form(self, words: Words, depth: int) -> None:
        self.forms.append(words)
        first = words[0]
        if first is None:
            return self.anything("a command named by an expansion or a glob", add=False)
        named = first.rsplit("/", 1)[-1]
        if named in _RUNS_TEXT:
            return self.anything(f"{named}, which runs text as commands")
        if named == "exec":
            self.not_known("exec")
        if named in _TAKES_NAMES and _subscripted(named, words):
            return self.anything(_SUBSCRIPT)
        text = shell_text(words)
        if isinstance(text, str):
            return self.read(text, depth + 1)
        if text is not None:
            return self.anything(f"{named} reading a script or its input")
        for command in inner(words):
            if command == RUNS_ANYTHING:
                self.anything(f"{named}, whose command cannot be known")
            elif depth >= MOST_DEPTH:
                self.anything("commands within commands too deep to follow")
            else:
                self.form(command, depth + 1)
        return None


_ARITHMETIC = "arithmetic, which may run what a variable holds"
_SUBSCRIPT = "a name with a subscript, which is arithmetic"


def _evaluates(node: Node) -> str | None:
    """Why bash may run text found in a variable at `node` (arithmetic, a prompt, a reference),
    or None."""
    kind = node.type  # a node's text only where it is needed: a list's is most of the line
    if kind == "expansion" and _EVALUATES.search(_text(node)):
        return "an expansion that evaluates what a variable holds"
    if kind == "ansi_c_string" and "\\" in _text(node):
        return "a $'...' string, whose escapes may hide a command"
    if kind in ("arithmetic_expansion", "c_style_for_statement") or (
        kind == "compound_statement" and node.child_count and node.children[0].type == "(("
    ):
        return _ARITHMETIC
    if kind == "subscript":
        return "a subscript, which is arithmetic"
    if kind == "test_operator" and _text(node) in _ARITHMETIC_TESTS:
        return _ARITHMETIC
    if kind == "test_operator" and _text(node) == "-v":
        operand = node.next_named_sibling
        word = _word(operand) if operand is not None else None
        return _SUBSCRIPT if word is None or "[" in word else None
    if kind == "declaration_command":
        for part in node.named_children:
            said = _text(part)
            if part.type == "word" and said.startswith("-") and ("i" in said or "n" in said):
                return "an integer or a reference, whose values are evaluated"
            if part.type != "variable_assignment" and "[" in said:
                return _SUBSCRIPT
    return None


def _subscripted(named: str, words: Words) -> bool:
    """Whether a command that takes variable names may be given one with a subscript (`read
    'a[$(rm x)]'`), whose index bash evaluates as arithmetic."""
    names = words[1:]
    if named in _NAMED_BY_V:
        if "-v" not in names:
            return False
        names = names[names.index("-v") + 1 :]
    return any(word is None or "[" in word for word in names if word != "]")


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _word(node: Node) -> str | None:
    """The word `node` is once bash removes its quotes; None when it holds an expansion or a
    glob (it may stand for any words)."""
    stack = [node]
    while stack:
        part = stack.pop()
        if part.type in _EXPANSIONS:
            return None
        stack.extend(part.children)
    return _unquoted(_text(node))


def _unquoted(text: str) -> str | None:
    """`text` with bash's quote removal; None when bash would expand it (a `$`, a backquote, a
    glob, braces, an extended glob)."""
    if _BRACES.search(text):
        return None
    out: list[str] = []
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
            at += 1
            while at < end and text[at] != '"':
                if text[at] in "$`":
                    return None
                if text[at] == "\\" and at + 1 < end and text[at + 1] in '$`"\\\n':
                    out.append("" if text[at + 1] == "\n" else text[at + 1])
                    at += 2
                    continue
                out.append(text[at])
                at += 1
            if at >= end:
                return None
            at += 1
        elif char in "$`*?(" or (char == "[" and "]" in text[at + 1 :]):
            return None
        else:
            out.append(char)
            at += 1
    return "".join(out)
