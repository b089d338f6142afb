"""What a command that runs another command runs: the wrappers a `shell` rule sees through
(`env rm`, `sudo rm`, `timeout 5 rm`, `xargs rm`, `find -exec rm`). Pure.

A command is its words, each a string or `None` (a word no reading can know: an expansion, a
glob; it may stand for any number of words). `inner` gives the words of the command a wrapper
runs, `None` when it runs none, or `RUNS_ANYTHING` when what it runs cannot be known (its
options hold an unknown word, or it runs text: `env -S`, `sudo -s`).

Not followed, and said so in docs/security.md: programs that run a command they are given in
another form (`watch`, `flock -c`, `chrt`, `taskset`, `strace`, `su -c`) or run code (`python
-c`, `awk`'s `system`), and programs that run one their environment names (`GIT_SSH_COMMAND`,
`PAGER`).
"""

from __future__ import annotations

from attrs import field, frozen

__all__ = ["RUNS_ANYTHING", "SHELLS", "Words", "inner", "shell_text"]

Words = tuple[str | None, ...]

RUNS_ANYTHING: Words = (None,)

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "posh", "yash"})


@frozen
class _Spec:
    """How a wrapper's options are read: which short and long ones take a value, which make
    it run text as a shell line (`runs_text`), with which it runs no command (`quiet`), how
    many words stand before the command (`positional`), whether `NAME=value` words do."""

    valued: str = ""
    long_valued: frozenset[str] = field(default=frozenset())
    runs_text: str = ""
    long_runs_text: frozenset[str] = field(default=frozenset())
    quiet: str = ""
    positional: int = 0
    assignments: bool = False


_WRAPPERS = {
    "command": _Spec(quiet="vV"),
    "builtin": _Spec(),
    "exec": _Spec(valued="a"),
    "env": _Spec(valued="uC", long_valued=frozenset({"--unset", "--chdir"}), runs_text="S",
                 long_runs_text=frozenset({"--split-string"}), assignments=True),
    "nice": _Spec(valued="n", long_valued=frozenset({"--adjustment"})),
    "nohup": _Spec(),
    "setsid": _Spec(),
    "stdbuf": _Spec(valued="ioe", long_valued=frozenset({"--input", "--output", "--error"})),
    "timeout": _Spec(valued="ks", long_valued=frozenset({"--kill-after", "--signal"}),
                     positional=1),
    "time": _Spec(valued="fo", long_valued=frozenset({"--format", "--output"})),
    "sudo": _Spec(valued="ugpCDhrtTUR", runs_text="si", quiet="lvVKe",
                  long_valued=frozenset({"--user", "--group", "--prompt", "--close-from",
                                         "--chdir", "--host", "--role", "--type",
                                         "--command-timeout", "--other-user", "--chroot"}),
                  long_runs_text=frozenset({"--shell", "--login"})),
    "doas": _Spec(valued="Cu", runs_text="s"),
    "ionice": _Spec(valued="cnpPu"),
    "chroot": _Spec(long_valued=frozenset({"--userspec", "--groups"}), positional=1),
    "busybox": _Spec(),
    "coproc": _Spec(),
}  # fmt: skip

_EXECS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _name(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def inner(words: Words) -> list[Words]:
    """The commands the wrapper `words` runs (none when it is no wrapper, or runs none)."""
    first = words[0]
    if first is None:
        return []
    name = _name(first)
    if name == "find":
        return _find(words)
    if name == "xargs":
        return _xargs(words)
    spec = _WRAPPERS.get(name)
    if spec is None:
        return []
    at = _options(words, spec)
    if at is None or isinstance(at, tuple):
        return [] if at is None else [at]
    at += spec.positional
    return [words[at:]] if at < len(words) else []


def _options(words: Words, spec: _Spec) -> int | Words | None:
    """Where the command starts after `spec`'s options; None when no command runs, or
    `RUNS_ANYTHING`."""
    at = 1
    while at < len(words):
        word = words[at]
        if word is None:
            return RUNS_ANYTHING  # it may be an option, or several words
        if spec.assignments and "=" in word and not word.startswith("-"):
            at += 1
            continue
        if word == "--":
            return at + 1
        if word.startswith("--"):
            option, has_value = word.split("=", 1)[0], "=" in word
            if option in spec.long_runs_text:
                return RUNS_ANYTHING
            at += 2 if option in spec.long_valued and not has_value else 1
            continue
        if word.startswith("-") and len(word) > 1:
            taken = 1
            for place, letter in enumerate(word[1:], start=1):
                if letter in spec.runs_text:
                    return RUNS_ANYTHING
                if letter in spec.quiet:
                    return None
                if letter in spec.valued:
                    taken += place == len(word) - 1  # the value is the next word
                    break  # the rest of the word is the value
            at += taken
            continue
        if word == "-":  # env's -i
            at += 1
            continue
        return at
    return None


def _find(words: Words) -> list[Words]:
    """The commands `find` runs with `-exec`, `-execdir`, `-ok` and `-okdir`: each `{}` is a
    path it found (any word). An unknown word may itself be an `-exec`."""
    if None in words:
        return [RUNS_ANYTHING]
    found: list[Words] = []
    at = 1
    while at < len(words):
        if words[at] in _EXECS:
            end = at + 1
            while end < len(words) and words[end] not in (";", "+"):
                end += 1
            command = tuple(None if w == "{}" else w for w in words[at + 1 : end])
            if command:
                found.append(command)
            at = end
        at += 1
    return found


_XARGS = _Spec(valued="aEdILnPs", long_valued=frozenset({"--arg-file", "--delimiter",
               "--max-lines", "--max-args", "--max-procs", "--max-chars",
               "--process-slot-var"}))  # fmt: skip


def _xargs(words: Words) -> list[Words]:
    """The command `xargs` runs, the words it reads appended (any words), and each word that
    holds its replace string (`-I`, `-i`) any word too."""
    replace = None
    for at, word in enumerate(words[1:], start=1):
        if word is None:
            break
        if word == "-I" and at + 1 < len(words):
            replace = words[at + 1]
        elif word.startswith("-I") and len(word) > 2:
            replace = word[2:]
        elif word in ("-i", "--replace"):
            replace = "{}"
        elif word.startswith(("-i", "--replace=")):
            replace = word.split("=", 1)[1] if "=" in word else word[2:]
        elif not word.startswith("-"):
            break
    start = _options(words, _XARGS)
    if isinstance(start, tuple):
        return [start]
    command = words[start:] if start is not None else ()
    if not command:
        return []  # it echoes
    if replace is None:
        return [(*command, None)]
    if replace == "":
        return [RUNS_ANYTHING]
    return [tuple(None if w is None or replace in w else w for w in command)]


def shell_text(words: Words) -> str | Words | None:
    """What a shell (`sh`, `bash`, ...) runs: the text after `-c` (to be read as a line);
    `RUNS_ANYTHING` when it reads a script, its input, or a `-c` text no reading can know;
    None when it is no shell."""
    first = words[0]
    if first is None or _name(first) not in SHELLS:
        return None
    at, given = 1, False
    while at < len(words):
        word = words[at]
        if word is None:
            return RUNS_ANYTHING
        if word == "--" or word == "-":
            at += 1
            break
        if word.startswith("--"):
            at += 2 if word in ("--rcfile", "--init-file") else 1
            continue
        if word[:1] in ("-", "+") and len(word) > 1:
            given = given or "c" in word[1:]
            at += 2 if ("o" in word[1:] or "O" in word[1:]) else 1
            continue
        break
    if not given or at >= len(words):
        return RUNS_ANYTHING  # a script, or what it reads
    text = words[at]
    return RUNS_ANYTHING if text is None else text
