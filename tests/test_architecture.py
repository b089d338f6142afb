"""docs/architecture.md draws the tree as it is: every module and package it names exists, and
every package is on it. A path is a backticked token (or a word of a fenced picture) such as
`loopd/loop/turn.py`, `store/` or `layout.py`, looked for under `src/boxmaker/`, or at the
repository's root when it starts with one of its folders (`tests/...`, `docs/...`,
`bxdev/...`); a dotted name `boxmaker.x.y` names a module or package. Anything else (`<home>/`
names, `/slots`, `loop.sock`, `store.fs`) is not a path of the tree and is left alone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "src" / "boxmaker"
DOC = ROOT / "docs" / "architecture.md"
AT_ROOT = ("tests/", "docs/", "bxdev/", "recordings/", "src/")  # checked against ROOT

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`([^`\n]+)`")
RELATIVE = re.compile(r"[A-Za-z_][\w.-]*(?:/[\w.-]+)*/?")  # no `<`, no leading `/`, no space
MODULE = re.compile(r"boxmaker(?:\.[a-z_][a-z0-9_]*)+")


def is_path(token: str) -> bool:
    """Whether `token` names a module, a package or a file of the repository."""
    if MODULE.fullmatch(token):
        return True
    if not RELATIVE.fullmatch(token):
        return False
    return token.endswith((".py", "/")) or token.startswith(AT_ROOT)


def paths_in(text: str) -> list[str]:
    """Every path `text` names, sorted, once each: its backticked tokens, and the words of its
    fenced blocks (the picture), whose brackets and commas are not part of a name."""
    tokens = [word.strip("(),;:") for block in FENCE.findall(text) for word in block.split()]
    tokens += SPAN.findall(FENCE.sub("", text))
    return sorted({token for token in tokens if is_path(token)})


def exists(path: str) -> bool:
    """Whether `path` is in the tree: a module (`.py`), a package (`/`, its `__init__.py`
    there: a folder left with only `__pycache__` is no package), a dotted module name, or a
    file or folder at the repository's root."""
    if MODULE.fullmatch(path):
        target = PACKAGE.parent.joinpath(*path.split("."))
        return (target / "__init__.py").is_file() or target.with_suffix(".py").is_file()
    if path.startswith(AT_ROOT):
        return (ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).is_file()
    if path.endswith("/"):
        return (PACKAGE / path / "__init__.py").is_file()
    return (PACKAGE / path).is_file()


def missing(paths: list[str]) -> list[str]:
    return [path for path in paths if not exists(path)]


def test_every_path_the_page_names_exists() -> None:
    paths = paths_in(DOC.read_text())
    assert len(paths) > 30  # the extraction sees the page (it names well over a hundred)
    assert missing(paths) == []


def test_the_check_sees_a_missing_path() -> None:
    text = (
        "`loopd/loop/turn.py` runs in `daemon/serve.py`; `store/` and `broker/` and "
        "`boxmaker.loopd.serve` and `boxmaker.loopd.nowhere`, see `tests/nowhere.py`.\n"
        "```\n   daemon/   serve · service\n   (loopd/cache/)  clock.py, nowhere.py\n```\n"
    )
    assert paths_in(text) == [
        "boxmaker.loopd.nowhere", "boxmaker.loopd.serve", "broker/", "clock.py", "daemon/",
        "daemon/serve.py", "loopd/cache/", "loopd/loop/turn.py", "nowhere.py", "store/",
        "tests/nowhere.py",
    ]  # fmt: skip
    assert missing(paths_in(text)) == [
        "boxmaker.loopd.nowhere", "broker/", "daemon/", "daemon/serve.py", "nowhere.py",
        "tests/nowhere.py",
    ]  # fmt: skip


def test_what_is_not_a_path_of_the_tree_is_left_alone() -> None:
    text = (
        "`<home>/broker/grants/` `run/broker/broker.sock` `/slots` `GET /slots` `store.fs` "
        "`loop.sock` `[DONE]` `python -m boxmaker.testing` `epoch`/`epochs`"
    )
    assert paths_in(text) == []


def test_every_package_is_on_the_page() -> None:
    named = set(paths_in(DOC.read_text()))
    packages = sorted(
        f"{init.parent.relative_to(PACKAGE).as_posix()}/"
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE
    )
    assert len(packages) > 10
    assert [package for package in packages if package not in named] == []


def test_the_decisions_are_a_record_by_topic() -> None:
    # What holds, by topic, short enough to read: no section named after an issue.
    text = (ROOT / "docs" / "decisions.md").read_text()
    assert len(text.splitlines()) <= 450
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert len(headings) > 10
    assert [h for h in headings if re.search(r"\bissues?\b|#\d", h, re.IGNORECASE)] == []
