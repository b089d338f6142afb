"""Where an MCP server's command is installed, so that the sandbox shows it without the owner
listing every folder under `read`: a virtual environment, an `npm install --prefix`, a pipx
venv, the Python or Node a script's first line names.

For the command's program (found on brokerd's `PATH` when it has no `/`), as it is named and
as its links resolve, and for the interpreter its first line names (`#!/path`, or `#!/usr/bin/env
name`), the folder tree it belongs to is shown read-only at its own path: beneath a
`node_modules`, the folder holding the outermost one (a package's dependencies are beside
it); in a `bin` folder, the folder above it (a venv, a prefix: `lib/` is there); else its own
folder. A file the command's arguments name by an absolute path (`python /srv/server.py`)
shows its folder. A tree that is the root of the file system or a folder right below it
(`/etc`, `/home`), a user's home, or holds one of brokerd's own places (`guarded`) is too
wide: its file's folder alone is shown instead, and not even that when it is too wide too.
Blocking reads of a few files' first bytes.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..errors import MissingCommand

__all__ = ["MissingCommand", "installed"]

_FIRST_LINE = 256  # bytes of a script's first line read
_SYSTEM = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"))


def installed(
    command: Sequence[str], path: str, guarded: Sequence[Path] = ()
) -> tuple[str, tuple[Path, ...]]:
    """The program to run (an absolute path) and the folders it is installed in, beyond the
    system's own (`/usr` and its links, which every sandbox shows).

    Raises:
        MissingCommand: the program is not found on `path` (brokerd's `PATH`).
    """
    program = command[0]
    found = program if "/" in program else shutil.which(program, path=path)
    if found is None or not os.path.isfile(found):
        where = "" if "/" in program else f" on brokerd's PATH ({path})"
        raise MissingCommand(f"{program} is not found{where}: name it by its absolute path")
    found = os.path.abspath(found)
    files = [Path(found), Path(os.path.realpath(found))]
    for interpreter in _interpreters(files[-1], path):
        files += [interpreter, Path(os.path.realpath(interpreter))]
    trees = [_tree(file, guarded) for file in files]
    trees += [
        Path(word).parent for word in command[1:] if word.startswith("/") and os.path.isfile(word)
    ]
    wide = [tree for tree in trees if tree is not None and _too_wide(tree, guarded)]
    shown = [t for t in dict.fromkeys(trees) if t is not None and not _system(t) and t not in wide]
    return found, tuple(_outermost(shown))


def _interpreters(script: Path, path: str) -> list[Path]:
    """The interpreter a script's first line names (through `env`), if it is a script."""
    try:
        with open(script, "rb") as file:
            first = file.read(_FIRST_LINE).split(b"\n", 1)[0]
    except OSError:
        return []
    if not first.startswith(b"#!"):
        return []
    words = first[2:].decode(errors="replace").split()
    if not words:
        return []
    if Path(words[0]).name == "env":
        named = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
        found = shutil.which(named, path=path) if named else None
        return [Path(found)] if found else []
    return [Path(words[0])] if os.path.isfile(words[0]) else []


def _tree(file: Path, guarded: Sequence[Path]) -> Path | None:
    """The folder tree `file` is installed in (or, when that is too wide, its folder; None
    when that is too wide too)."""
    parts = file.parts
    tree = file.parent
    if "node_modules" in parts:
        tree = Path(*parts[: parts.index("node_modules")])
    elif file.parent.name in ("bin", "sbin"):
        tree = file.parent.parent
    if not _too_wide(tree, guarded):
        return tree
    return None if _too_wide(file.parent, guarded) else file.parent


def _too_wide(tree: Path, guarded: Sequence[Path]) -> bool:
    if len(tree.parts) <= 2 or tree in _homes():  # `/`, `/etc`, `/home`, ...
        return True
    return any(place == tree or place.is_relative_to(tree) for place in guarded)


def _homes() -> set[Path]:
    homes = {Path("/root"), Path("/home")}
    with contextlib.suppress(OSError):
        homes |= {Path(entry.pw_dir) for entry in pwd.getpwall() if entry.pw_dir}
    return homes


def _system(tree: Path) -> bool:
    return any(tree == system or tree.is_relative_to(system) for system in _SYSTEM)


def _outermost(trees: list[Path]) -> list[Path]:
    """`trees` without those inside another of them."""
    return [t for t in trees if not any(o != t and t.is_relative_to(o) for o in trees)]
