"""Pure modules never import trio or httpx, directly or through another boxmaker module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"
IO_LIBRARIES = {"trio", "httpx", "httpcore", "anyio", "socket", "subprocess"}

PURE = [
    "boxmaker.proto",
    "boxmaker.config",
    "boxmaker.clock",
    "boxmaker.infer.errors",
    "boxmaker.infer.sse",
    "boxmaker.infer.stream",
    "boxmaker.infer.cache",
    "boxmaker.infer.request",
    "boxmaker.testing._render",
    "boxmaker.testing._wire",
    "boxmaker.testing._completion",
    "boxmaker.testing.recording",
    "boxmaker.testing.shape",
    "boxmaker.session.baseline",
    "boxmaker.session.replay",
    "boxmaker.session.log",
    "boxmaker.session.errors",
    "boxmaker.channel.codec",
    "boxmaker.cli.render",
]


def module_file(name: str) -> Path:
    path = SRC.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imports_of(name: str) -> set[str]:
    """Absolute names of the modules `name` imports, relative imports resolved."""
    path = module_file(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            stem = node.module or ""
            prefix = f"{base}.{stem}".strip(".") if node.level else stem
            found.add(prefix)
            # `from . import x` may import the submodule x
            for alias in node.names:
                candidate = f"{prefix}.{alias.name}"
                if module_file(candidate).exists():
                    found.add(candidate)
    return found


def io_imports(name: str, seen: set[str] | None = None) -> set[str]:
    """The I/O libraries reachable from `name`, following boxmaker imports, as `via -> lib`."""
    seen = set() if seen is None else seen
    if name in seen:
        return set()
    seen.add(name)
    bad: set[str] = set()
    path = module_file(name)
    children = [name]
    if path.name == "__init__.py":  # a package: all of its modules are part of it
        children += [f"{name}.{p.stem}" for p in path.parent.glob("*.py") if p.stem != "__init__"]
    for child in children:
        for imported in imports_of(child) if child == name else {child}:
            root = imported.split(".")[0]
            if root in IO_LIBRARIES:
                bad.add(f"{child} -> {imported}")
            elif root == "boxmaker" and module_file(imported).exists():
                bad |= io_imports(imported, seen)
    return bad


@pytest.mark.parametrize("name", PURE)
def test_pure_module_imports_no_io_library(name: str) -> None:
    assert io_imports(name) == set()


def test_the_check_sees_an_io_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "boxmaker"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "pure.py").write_text("from . import helper\n")
    (pkg / "helper.py").write_text("import trio\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", tmp_path)
    assert io_imports("boxmaker.pure") == {"boxmaker.helper -> trio"}
