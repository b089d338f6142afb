"""A `shell` command line read as bash reads it, with tree-sitter-bash: every command it may
run, as its words, and whether all of them can be known before it runs. Pure.

Every simple command is found wherever it stands (in a pipeline, a list, a subshell, a loop, a
function's body, a command or process substitution, a heredoc), its words read with bash's
quote removal (`r\\m`, `'r'm` and `"rm"` are `rm`: `shell_words.py`). A word that holds an
expansion (`$x`, `${x@P}`, `$[x]`, `$(...)`, `{a,b}`, `$'...'`, a leading `~`) is unknown: it
may stand for any words; a glob in a command's name is too. What a wrapper runs is a command of
the line too (`wrappers.py`), and so is each command of a shell's `-c` text, read the same way.

The line is *unknown* (its commands cannot all be known before it runs) when it holds an
unknown word anywhere, an assignment (`x=1`, `read x`, `printf -v x`), a function, `exec`, or
text bash runs as commands. It *may run anything* (the words `RUNS_ANYTHING` are among its
commands) when: a command's name is unknown; it runs text (`eval`, `source`, `trap`, `alias`,
`hash`, `let`, a shell reading a script or its input, `env -S`, `sudo -s`); it evaluates
arithmetic, which runs the command substitutions in a variable's value (`(( ))`, `$(( ))`,
`$[ ]`, a subscript, an array's index, `[[ a -eq b ]]`, `declare -i`, `${x:i}`, `${!x}`,
`${x@P}`); it names a variable with a subscript, or one bash runs as code (`PS4`, `BASH_ENV`,
`BASH_FUNC_*`, `BASH_CMDS`), however it sets it; or the parser may read it otherwise than bash
(a control character, a line continuation, a heredoc whose delimiter or body it reads
otherwise, a substitution it leaves unread in a pattern or a default, a node it does not
know), or cannot read it at all (a syntax error, a line over `MOST_CHARS`, more than
`MOST_DEPTH` wrappers and texts within each other, more than `MOST_NODES` in all).
"""

from __future__ import annotations

import re

import tree_sitter_bash
from attrs import frozen
from tree_sitter import Language, Node, Parser

from .shell_words import (
    differs,
    evaluating,
    is_code_variable,
    is_name,
    names_assigned,
    plain_delimiter,
    unquoted,
)
from .wrappers import RUNS_ANYTHING, Words, inner, shell_text

__all__ = ["MOST_CHARS", "MOST_DEPTH", "MOST_NODES", "Reading", "read_line"]

MOST_CHARS = 65536
MOST_DEPTH = 8
MOST_NODES = 200_000  # in all the texts a line holds, followed

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
# The nodes of tree-sitter-bash 0.25 this reader knows; another may be read otherwise.
_KNOWN = frozenset(_EXPANSIONS) | frozenset(
    {
        "array",
        "binary_expression",
        "c_style_for_statement",
        "case_item",
        "case_statement",
        "command",
        "command_name",
        "comment",
        "compound_statement",
        "concatenation",
        "declaration_command",
        "do_group",
        "elif_clause",
        "else_clause",
        "extglob_pattern",
        "file_descriptor",
        "file_redirect",
        "for_statement",
        "function_definition",
        "heredoc_body",
        "heredoc_content",
        "heredoc_end",
        "heredoc_redirect",
        "heredoc_start",
        "herestring_redirect",
        "if_statement",
        "list",
        "negated_command",
        "number",
        "parenthesized_expression",
        "pipeline",
        "postfix_expression",
        "program",
        "raw_string",
        "redirected_statement",
        "regex",
        "special_variable_name",
        "string",
        "string_content",
        "subscript",
        "subshell",
        "ternary_expression",
        "test_command",
        "test_operator",
        "unary_expression",
        "unset_command",
        "variable_assignment",
        "variable_assignments",
        "variable_name",
        "while_statement",
        "word",
    }
)
_RUNS_TEXT = frozenset((
    "eval", "source", ".", "trap", "alias", "hash", "enable", "bind", "complete", "compgen", "fc",
    "let", "mapfile", "readarray", "time", "coproc",
))  # names, packed # fmt: skip
_DECLARES = frozenset({"declare", "typeset", "local", "export", "readonly"})
_ASSIGNS = frozenset({"read", "printf", "getopts", "wait"})
_TAKES_NAMES = frozenset({"unset", "test", "["})
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_SUBSTITUTIONS = ("`", "$(", "<(", ">(", "${", "$[")
_SIMPLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])")
_ARITHMETIC = "arithmetic, which may run what a variable holds"
_SUBSCRIPT = "a name with a subscript, which is arithmetic"


@frozen
class Reading:
    """What a line may run (`forms`: each command as its words, `None` an unknown word), why
    not all of it can be known before it runs (`unknown`; None when it can), and why it may run
    any command (`anything`; None when it may not)."""

    forms: tuple[Words, ...]
    unknown: str | None
    anything: str | None = None


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
        self.nodes = MOST_NODES
        self.chars = 4 * MOST_CHARS  # read in all: each `sh -c` text is read again

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
        self.chars -= len(line)
        if self.chars < 0:
            return self.anything("texts within texts too long to follow")
        if (why := differs(line)) is not None:
            return self.anything(why)
        tree = Parser(_BASH).parse(line.encode("utf-8", "surrogatepass"))
        if tree.root_node.has_error:
            return self.anything("a part the parser cannot read")
        stack = [(tree.root_node, False)]
        while stack:
            node, inside = stack.pop()  # inside: within a `${...}`
            self.nodes -= 1
            if self.nodes < 0:
                return self.anything(f"more than {MOST_NODES} parts to follow")
            self.node(node, depth, inside)
            inside = inside or node.type == "expansion"
            stack.extend((child, inside) for child in reversed(node.children))
        return None

    def node(self, node: Node, depth: int, inside: bool) -> None:
        kind = node.type
        if node.is_named and kind not in _KNOWN:
            self.anything(f"a {kind} the reader does not know")
        elif kind == "command":
            self.command(node, depth)
        elif kind in _EXPANSIONS:
            self.not_known(_EXPANSIONS[kind])
        elif kind == "function_definition":
            self.not_known("a function")
        elif kind == "variable_assignment":
            self.not_known("a variable set")
            name = node.child_by_field_name("name")
            if name is not None and is_code_variable(_text(name)):
                self.anything(f"{_text(name)}, which bash runs as code")
        elif kind == "declaration_command":
            self.not_known("a variable declared")
        elif kind == "heredoc_redirect":
            self.heredoc(node)
        if (why := _unread(node, inside)) is not None:
            self.anything(why)

    def command(self, node: Node, depth: int) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            return None
        if _text(name).isdigit():  # `0</dev/null rm`: a redirection, to bash
            return self.anything("a redirection the parser reads as a command's name")
        words: list[str | None] = [_word(name)]
        words += [_word(argument) for argument in node.children_by_field_name("argument")]
        return self.form(tuple(words), depth)

    def heredoc(self, node: Node) -> None:
        """A heredoc whose delimiter the parser reads as bash does, whose end it found, and
        whose body it reads (quoted: data; unquoted: no `$`, backquote or backslash)."""
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        end = next((c for c in node.children if c.type == "heredoc_end"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        delimiter = plain_delimiter(_text(start)) if start is not None else None
        if delimiter is None or end is None or _text(end).strip("\t") != delimiter[0]:
            return self.anything("a heredoc whose end the parser may find otherwise than bash")
        if not delimiter[1] and body is not None and any(c in _text(body) for c in "$`\\"):
            return self.anything("a heredoc whose body bash expands otherwise than the parser")
        return None

    def form(self, words: Words, depth: int) -> None:
        self.forms.append(words)
        first = words[0]
        if first is None:
            return self.anything("a command named by an expansion or a glob", add=False)
        named = first.rsplit("/", 1)[-1]
        if named in _RUNS_TEXT:
            return self.anything(f"{named}, which runs text as commands")
        if named in _DECLARES:
            return self.anything(f"{named} as a command, whose names may be evaluated")
        if named == "exec":
            self.not_known("exec")
        if named in _ASSIGNS and (names := names_assigned(named, words)):
            self.not_known("a variable set")
            if any(not is_name(n) or is_code_variable(n or "") for n in names):
                return self.anything(_SUBSCRIPT + ", or one bash runs as code")
        if named in _TAKES_NAMES and _subscripted(named, words):
            return self.anything(_SUBSCRIPT)
        if named == "env" and any(
            is_code_variable(w.split("=", 1)[0]) for w in words[1:] if w and "=" in w
        ):
            return self.anything("env setting a variable bash runs as code")
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


def _unread(node: Node, inside: bool) -> str | None:
    """Why bash may run what the parser left unread at `node` (a substitution in a pattern, a
    regex or a default), or text a variable holds (arithmetic, a prompt, a reference), or
    None."""
    kind = node.type  # a node's text only where it is needed: a list's is most of the line
    if node.is_named and node.child_count == 0 and kind not in ("comment", "heredoc_body"):
        text = _text(node)
        if (kind != "raw_string" or inside) and any(s in text for s in _SUBSTITUTIONS):
            return "a substitution the parser left unread"
    if kind == "word" and "\n" in _text(node):  # `ls⏎\\rm`: two commands, to bash
        return "a word across lines, read otherwise by the parser"
    if kind == "command" and any(not child.is_named for child in node.children):
        return "a word the parser reads as an operator"  # `ls ==⏎rm`
    if kind == "test_command" and ("<(" in _text(node) or ">(" in _text(node)):
        return "a process substitution the parser reads as a comparison"
    if kind == "simple_expansion" and not _SIMPLE.fullmatch(_text(node)):
        return "a word the parser reads otherwise than bash"  # `x=$ rm`: `$`, then `rm`
    if kind == "file_redirect" and len(node.children_by_field_name("destination")) > 1:
        return "words the parser takes for a redirection's, which bash may run"
    if kind == "expansion" and evaluating(_text(node)):
        return "an expansion that evaluates what a variable holds"
    if kind == "ansi_c_string" and "\\" in _text(node):
        return "a $'...' string, whose escapes may hide a command"
    if kind in ("arithmetic_expansion", "c_style_for_statement") or (
        kind == "compound_statement" and node.child_count and node.children[0].type == "(("
    ):
        return _ARITHMETIC
    if kind == "subscript" or (kind == "array" and "[" in _text(node)):
        return "a subscript, which is arithmetic"
    if kind == "test_operator" and _text(node) in _ARITHMETIC_TESTS:
        return _ARITHMETIC
    if kind == "test_operator" and _text(node) == "-v":
        operand = node.next_named_sibling
        word = _word(operand) if operand is not None else None
        return _SUBSCRIPT if word is None or "[" in word else None
    if kind == "declaration_command":
        for part in node.named_children[:64]:
            if part.type == "variable_assignment":
                continue
            said = _word(part) or "-in["  # unknown: may be any of them
            if said.startswith("-") and ("i" in said or "n" in said):
                return "an integer or a reference, whose values are evaluated"
            if "[" in said or is_code_variable(said.split("=", 1)[0]):
                return _SUBSCRIPT + ", or one bash runs as code"
    return None


def _subscripted(named: str, words: Words) -> bool:
    """Whether a command that takes variable names may be given one with a subscript (`unset
    'a[$(rm x)]'`, `[ -v 'a[...]' ]`), whose index bash evaluates as arithmetic."""
    names = words[1:]
    if named != "unset":
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
    return unquoted(_text(node))
