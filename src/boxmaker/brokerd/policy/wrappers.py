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
    """How a wrapper's options are read: its short options that stand alone (`flags`), take a
    value (`valued`) or one only in the same word (`attached`), make it run text as a shell
    line (`runs_text`), or mean it runs no command (`quiet`); its long ones the same (a GNU
    program takes any unambiguous start of one); how many words stand before the command
    (`positional`); whether `NAME=value` words do. An option it does not know may take a
    value: what it runs cannot be known."""

    flags: str = ""
    attached: str = ""  # a value only when written in the same word (`xargs -i{}`)
    valued: str = ""
    runs_text: str = ""
    quiet: str = ""
    long_flags: frozenset[str] = field(default=frozenset())
    long_valued: frozenset[str] = field(default=frozenset())
    long_runs_text: frozenset[str] = field(default=frozenset())
    positional: int = 0
    assignments: bool = False


def _longs(*names: str) -> frozenset[str]:
    return frozenset(f"--{name}" for name in names)


_HELP = _longs("help", "version")
_WRAPPERS = {
    "command": _Spec(flags="p", quiet="vV"),
    "builtin": _Spec(),
    "!": _Spec(),
    "exec": _Spec(flags="cl", valued="a"),
    "env": _Spec(
        flags="i0v",
        valued="uC",
        runs_text="S",
        assignments=True,
        long_flags=_longs(
            "ignore-environment",
            "null",
            "debug",
            "block-signal",
            "default-signal",
            "ignore-signal",
            "list-signal-handling",
        ),
        long_valued=_longs("unset", "chdir"),
        long_runs_text=_longs("split-string"),
    ),
    "nice": _Spec(valued="n", long_valued=_longs("adjustment")),
    "nohup": _Spec(),
    "setsid": _Spec(flags="cfw", long_flags=_longs("ctty", "fork", "wait")),
    "stdbuf": _Spec(valued="ioe", long_valued=_longs("input", "output", "error")),
    "timeout": _Spec(
        flags="fpv",
        valued="ks",
        positional=1,
        long_flags=_longs("foreground", "preserve-status", "verbose"),
        long_valued=_longs("kill-after", "signal"),
    ),
    "sudo": _Spec(
        flags="AbEHknPSB",
        valued="ugpCDhrtTUR",
        runs_text="si",
        quiet="lvVKe",
        long_flags=_longs(
            "askpass",
            "background",
            "preserve-env",
            "set-home",
            "non-interactive",
            "preserve-groups",
            "stdin",
            "bell",
            "reset-timestamp",
            "remove-timestamp",
        ),
        long_valued=_longs(
            "user",
            "group",
            "prompt",
            "close-from",
            "chdir",
            "host",
            "role",
            "type",
            "command-timeout",
            "other-user",
            "chroot",
        ),
        long_runs_text=_longs("shell", "login"),
    ),
    "doas": _Spec(flags="n", valued="Cu", runs_text="s"),
    "ionice": _Spec(
        flags="t",
        valued="cnpPu",
        long_flags=_longs("ignore"),
        long_valued=_longs("class", "classdata", "pid", "pgid", "uid"),
    ),
    "chroot": _Spec(
        positional=1, long_flags=_longs("skip-chdir"), long_valued=_longs("userspec", "groups")
    ),
    "busybox": _Spec(),
}

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
    if name == "jobs":  # `jobs -x command`: the command, its job specs replaced
        return [words[words.index("-x") + 1 :]] if "-x" in words[1:-1] else []
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
    `RUNS_ANYTHING` (an unknown word or option, or text run as a line)."""
    at = 1
    while at < len(words):
        word = words[at]
        if word is None:
            return RUNS_ANYTHING  # it may be an option, or several words
        if spec.assignments and "=" in word and not word.startswith("-"):
            at += 1
        elif word == "--":
            return at + 1
        elif word.startswith("--"):
            kind = _long(spec, word.split("=", 1)[0])
            if kind in ("anything", "unknown"):
                return RUNS_ANYTHING
            if kind == "quiet":
                return None
            at += 2 if kind == "valued" and "=" not in word else 1
        elif word.startswith("-") and len(word) > 1:
            taken = _short(spec, word)
            if taken is None or isinstance(taken, tuple):
                return taken
            at += taken
        elif word == "-" and spec.assignments:  # env's -i
            at += 1
        else:
            return at
    return None


def _long(spec: _Spec, option: str) -> str:
    """What the long `option` (or an unambiguous start of one) is to `spec`."""
    kinds = {
        "flag": spec.long_flags | _HELP,
        "valued": spec.long_valued,
        "anything": spec.long_runs_text,
    }
    found = {kind for kind, names in kinds.items() for name in names if name.startswith(option)}
    exact = {kind for kind, names in kinds.items() if option in names}
    found = exact or found
    if found == {"flag"} and option in _HELP:
        return "quiet"
    return found.pop() if len(found) == 1 else "unknown"


def _short(spec: _Spec, word: str) -> int | Words | None:
    """How many words the short options `word` take (1, or 2 when its last takes the next as
    its value); None when no command runs; `RUNS_ANYTHING` for one it does not know, or text."""
    for place, letter in enumerate(word[1:], start=1):
        if letter in spec.runs_text:
            return RUNS_ANYTHING
        if letter in spec.quiet:
            return None
        if letter in spec.valued:
            return 2 if place == len(word) - 1 else 1  # the rest of the word is its value
        if letter in spec.attached:
            return 1
        if letter not in spec.flags and not letter.isdigit():  # `nice -10`: a number
            return RUNS_ANYTHING
    return 1


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


_XARGS = _Spec(
    flags="0oprtx",
    attached="ile",
    valued="aEdILnPs",
    long_flags=_longs(
        "null",
        "eof",
        "replace",
        "max-lines",
        "interactive",
        "no-run-if-empty",
        "verbose",
        "exit",
        "show-limits",
        "open-tty",
    ),
    long_valued=_longs(
        "arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"
    ),
)


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
