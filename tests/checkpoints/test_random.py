"""For any small tree of files, folders and links and any sequence of calls changing it, an
undo to before the first call gives the tree back exactly (hypothesis)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.brokerd.checkpoints import (
    Manifest,
    Objects,
    StatCache,
    Step,
    plan_restore,
    restore,
    snapshot,
)

from .trees import tree_of

AS_ROOT = os.geteuid() == 0
FILE_MODES = (0o600, 0o644, 0o755, 0o640)
FOLDER_MODES = (0o700, 0o755, 0o750)

Op = tuple[str, str, object]
paths = st.lists(st.sampled_from("abc"), min_size=1, max_size=3).map("/".join)
ops = st.one_of(
    st.tuples(st.just("write"), paths, st.sampled_from([b"", b"one\n", b"two\n", b"\0\xff"])),
    st.tuples(st.just("mkdir"), paths, st.none()),
    st.tuples(st.just("remove"), paths, st.none()),
    st.tuples(st.just("link"), paths, st.sampled_from(["a", "../../out", "/etc/passwd", "b/c"])),
    st.tuples(st.just("mode"), paths, st.integers(0, 11)),
    st.tuples(st.just("owner"), paths, st.sampled_from([0, 1000] if AS_ROOT else [os.getuid()])),
)


def clear(path: Path) -> None:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def folders_to(root: Path, path: str) -> Path:
    """Make `path`'s folders real folders (a link or a file in the way is removed first)."""
    here = root
    for part in path.split("/")[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            here.unlink()
        here.mkdir(exist_ok=True)
    return root / path


def apply(root: Path, op: Op) -> None:
    verb, path, arg = op
    where = folders_to(root, path)
    if verb == "write":
        if where.is_dir() and not where.is_symlink():
            shutil.rmtree(where)
        elif where.is_symlink():
            where.unlink()
        assert isinstance(arg, bytes)
        where.write_bytes(arg)
    elif verb == "mkdir":
        if not (where.is_dir() and not where.is_symlink()):
            clear(where)
            where.mkdir()
    elif verb == "remove":
        clear(where)
    elif verb == "link":
        clear(where)
        where.symlink_to(str(arg))
    elif where.is_symlink() or not where.exists():
        return
    elif verb == "mode":
        assert isinstance(arg, int)
        modes = FOLDER_MODES if where.is_dir() else FILE_MODES
        where.chmod(modes[arg % len(modes)])
    else:
        assert isinstance(arg, int)
        os.chown(where, arg, arg)


def snap(folder: Path, objects: Objects, cache: StatCache) -> Manifest:
    found = snapshot(folder / "root", None, objects, max_files=1000, max_bytes=1 << 20,
                     cache=cache)  # fmt: skip
    assert isinstance(found, dict)
    return found


@settings(max_examples=50, deadline=None)
@given(start=st.lists(ops, max_size=8), calls=st.lists(st.lists(ops, min_size=1, max_size=3),
                                                        min_size=1, max_size=4))  # fmt: skip
def test_an_undo_of_any_calls_gives_the_tree_back(start: list[Op], calls: list[list[Op]]) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        root = folder / "root"
        root.mkdir()
        objects, cache = Objects(folder / "objects"), StatCache()
        for op in start:
            apply(root, op)
        tree = tree_of(root)
        target = snap(folder, objects, cache)
        steps = []
        for call in calls:
            before = snap(folder, objects, cache)
            for op in call:
                apply(root, op)
            steps.append(Step(before, snap(folder, objects, cache), ours=True))
        plan = plan_restore(target, steps, snap(folder, objects, cache))
        assert plan.conflicts == ()
        restore(root, None, plan, target, objects)
        assert tree_of(root) == tree
