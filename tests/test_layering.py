"""The rooms and their arrows (docs/architecture.md): pure modules never import an I/O
library, no module imports itself round a circle, `bxctl` loads neither the HTTP stack nor
the daemon, modules stay small, and the wheel ships the product only."""

from __future__ import annotations

import ast
import re
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"
IO_LIBRARIES = {"trio", "httpx", "httpcore", "h11", "anyio", "socket", "subprocess"}

PURE = [
    "boxmaker.attached.sniff",
    "boxmaker.attached.text",
    "boxmaker.brokerd.checkpoints.manifest",
    "boxmaker.brokerd.checkpoints.plan",
    "boxmaker.session.acts",
    "boxmaker.brokerd.files.limits",
    "boxmaker.brokerd.files.roots",
    "boxmaker.brokerd.mcp.adapt",
    "boxmaker.brokerd.policy._toml",
    "boxmaker.brokerd.policy.asking",
    "boxmaker.brokerd.policy.command_line",
    "boxmaker.brokerd.policy.commands",
    "boxmaker.brokerd.policy.decide",
    "boxmaker.brokerd.policy.parse",
    "boxmaker.brokerd.policy.rules",
    "boxmaker.brokerd.policy.shell_words",
    "boxmaker.brokerd.policy.wrappers",
    "boxmaker.brokerd.registry",
    "boxmaker.brokerd.sandbox.digest",
    "boxmaker.brokerd.sandbox.launch",
    "boxmaker.brokerd.sandbox.mounts",
    "boxmaker.brokerd.tool_search",
    "boxmaker.channel",
    "boxmaker.cli.commands",
    "boxmaker.cli.conversation",
    "boxmaker.cli.jsonout",
    "boxmaker.cli.render",
    "boxmaker.cli.status",
    "boxmaker.cli.table",
    "boxmaker.clock",
    "boxmaker.config",
    "boxmaker.gatewayd.answers",
    "boxmaker.gatewayd.markdown",
    "boxmaker.gatewayd.matrix.media",
    "boxmaker.gatewayd.matrix.sync",
    "boxmaker.gatewayd.port",
    "boxmaker.gatewayd.sent_files",
    "boxmaker.gatewayd.speakers",
    "boxmaker.gatewayd.words",
    "boxmaker.layout",
    "boxmaker.loopd.cache.outcome",
    "boxmaker.loopd.infer.errors",
    "boxmaker.loopd.infer.props",
    "boxmaker.loopd.infer.request",
    "boxmaker.loopd.infer.sse",
    "boxmaker.loopd.infer.stream",
    "boxmaker.loopd.infer.thinking",
    "boxmaker.loopd.loop.limits",
    "boxmaker.loopd.loop.repetition",
    "boxmaker.loopd.loop.tool_calls",
    "boxmaker.loopd.loop.words",
    "boxmaker.loopd.replay.compare",
    "boxmaker.loopd.replay.report",
    "boxmaker.loopd.replay.sides",
    "boxmaker.loopd.replay.step",
    "boxmaker.loopd.replay.tape",
    "boxmaker.memory.entries",
    "boxmaker.memory.notes",
    "boxmaker.memory.query",
    "boxmaker.profiles",
    "boxmaker.proto",
    "boxmaker.sansio",
    "boxmaker.schedules.book",
    "boxmaker.schedules.plan",
    "boxmaker.schedules.when",
    "boxmaker.session",
    "boxmaker.testing._answers",
    "boxmaker.testing._completion",
    "boxmaker.testing._openai",
    "boxmaker.testing._render",
    "boxmaker.testing._slots",
    "boxmaker.testing._wire",
    "boxmaker.testing.recording",
    "boxmaker.testing.shape",
    "boxmaker.tools",
]


def documented_pure() -> list[str]:
    """Every module whose docstring says it is pure (the word `Pure`)."""
    return [
        name
        for name in all_modules()
        if re.search(r"\bPure\b", ast.get_docstring(ast.parse(module_file(name).read_text())) or "")
    ]


def module_file(name: str) -> Path:
    path = SRC.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def all_modules() -> list[str]:
    names = []
    for path in sorted((SRC / "boxmaker").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def imports_of(name: str) -> set[str]:
    """Absolute names of the modules `name` imports anywhere in its text (in functions too),
    relative imports resolved; `from pkg import sub` counts the submodule."""
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
            submodules = {f"{prefix}.{a.name}" for a in node.names}
            submodules = {m for m in submodules if module_file(m).exists()}
            found |= submodules
            if len(submodules) < len(node.names):  # names from the module itself
                found.add(prefix)
    return found


def boxmaker_imports(name: str) -> set[str]:
    """The boxmaker modules `name` imports, and the packages above each (importing `a.b.c`
    runs `a/__init__` and `a/b/__init__` first), less the packages above `name` itself, which
    are already running when it is imported."""
    explicit = {
        m for m in imports_of(name) if m.split(".")[0] == "boxmaker" and module_file(m).exists()
    }
    parts = name.split(".")
    running = {".".join(parts[:i]) for i in range(1, len(parts))}
    implied = set()
    for imported in explicit:
        pieces = imported.split(".")
        implied.update(".".join(pieces[:i]) for i in range(2, len(pieces)))
    return (explicit | (implied - running)) - {name}


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


def test_every_module_documented_as_pure_is_checked() -> None:
    checked = [
        n for n in documented_pure() if not any(n == q or n.startswith(q + ".") for q in PURE)
    ]
    assert checked == []
    assert "boxmaker.brokerd.policy.decide" in documented_pure()  # the check sees the word


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


def circles(modules: list[str]) -> list[list[str]]:
    """Every import circle among `modules`, each as the path that closes it."""
    graph = {name: boxmaker_imports(name) for name in modules}
    found: list[list[str]] = []
    state: dict[str, str] = {}  # "open" while on the path, "done" after

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph.get(name, ())):
            if state.get(target) == "open":
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in modules:
        if name not in state:
            visit(name, [name])
    return found


def test_no_module_imports_itself_round_a_circle() -> None:
    assert circles(all_modules()) == []


def test_the_circle_check_sees_a_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "boxmaker"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import A\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from .b import B\n")  # hidden in a function
    (pkg / "sub" / "b.py").write_text("from .a import f\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", tmp_path)
    assert circles(all_modules()) == [["boxmaker.sub.a", "boxmaker.sub.b", "boxmaker.sub.a"]]


def loaded_by(module: str) -> set[str]:
    """The modules a fresh interpreter holds after importing `module`."""
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return set(result.stdout.split())


@pytest.mark.parametrize(
    ("module", "uses"),
    [
        ("boxmaker.cli.chat_command", "boxmaker.client"),
        ("boxmaker.cli.editor", "prompt_toolkit"),
    ],
)
def test_bxctl_loads_neither_the_http_stack_nor_the_daemon(module: str, uses: str) -> None:
    loaded = loaded_by(module)  # the editor is loaded only for a chat at a terminal
    forbidden = ("httpx", "httpcore", "h11", "boxmaker.loopd", "boxmaker.serving")
    assert sorted(m for m in loaded if m.startswith(forbidden)) == []
    assert uses in loaded  # the check sees what it does load


def test_bxctl_starts_without_trio_the_chat_the_memory_or_the_schema_checker() -> None:
    # `bxctl sessions` answers in about half the time without them (and the memory package,
    # SQLite and jsonschema cost a fifth of what is left: issue 49's footprint row).
    loaded = loaded_by("boxmaker.cli.bxctl")
    later = ("trio", "boxmaker.cli.chat", "boxmaker.channel", "boxmaker.client", "prompt_toolkit",
             "boxmaker.memory", "sqlite3", "jsonschema", "regex", "importlib.metadata",
             "boxmaker.schedules", "croniter", "zoneinfo")  # fmt: skip
    assert sorted(m for m in loaded if m.startswith(later)) == []
    assert "boxmaker.cli.sessions" in loaded


def test_modules_stay_small() -> None:
    sizes = {
        str(path.relative_to(SRC)): len(path.read_text().splitlines())
        for path in (SRC / "boxmaker").rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 400} == {}
    assert statistics.median(sizes.values()) < 150


def test_the_wheel_ships_the_product_only(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(SRC.parent), "--no-deps", "-q", "-w",
         str(tmp_path), "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("boxmaker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "boxmaker/cli/bxctl.py" in names
    developer = ("bench", "capture", "recorder", "llama", "bxdev", "processes", "/run.py")
    assert [n for n in names if any(word in n for word in developer)] == []


@pytest.mark.parametrize("package", ["boxmaker.store", "boxmaker.session"])
def test_the_store_and_the_session_rules_import_no_trio(package: str) -> None:
    # Blocking code: the daemon makes the thread hops, and bxctl reads sessions through it.
    assert {found for found in io_imports(package) if found.split(" -> ")[1] in TRIO} == set()


TRIO = {"trio", "anyio"}


def reaching_past(modules: list[str]) -> list[str]:
    """Every import of another package's module past its `__init__` (`boxmaker.loopd.infer.routes`
    from `boxmaker.loopd.cache`), as `importer -> imported`. A package's own modules import each
    other freely; top-level modules (`boxmaker.config`) are their own package. The test kit
    (`boxmaker.testing`, the fake llama-server) is not a room of the product: it takes the
    server's wire from `infer.sse` without loading the client."""
    found = []
    for name in modules:
        if name.startswith("boxmaker.testing"):
            continue
        own = name.split(".")[1] if name.count(".") >= 1 else ""
        for imported in sorted(imports_of(name)):
            parts = imported.split(".")
            if parts[0] != "boxmaker" or len(parts) < 3 or not module_file(imported).exists():
                continue
            if parts[1] != own:
                found.append(f"{name} -> {imported}")
    return found


def test_no_package_reaches_past_another_s_init() -> None:
    assert reaching_past(all_modules()) == []


def test_the_reach_check_sees_a_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "boxmaker"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "inner.py").write_text("")
    (pkg / "a" / "own.py").write_text("from .inner import x\n")
    (pkg / "b" / "user.py").write_text("from ..a import y\nfrom ..a.inner import z\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", tmp_path)
    assert reaching_past(all_modules()) == ["boxmaker.b.user -> boxmaker.a.inner"]


def idea_of(stem: str) -> str:
    """A module's name as an idea: without a leading `_`, singular (`epochs`: `epoch`)."""
    stem = stem.lstrip("_")
    return stem[:-1] if stem.endswith("s") and not stem.endswith("ss") else stem


def ideas_in_many_packages(modules: list[str], most: int = 2) -> dict[str, list[str]]:
    """Each idea whose name is on modules (or packages) in more than `most` packages, with
    those packages; an errors module per package, a daemon's entry point (`main`), and
    `__init__`, aside."""
    where: dict[str, set[str]] = {}
    for name in modules:
        *package, stem = name.split(".")
        if stem in ("errors", "main", "__init__", "__main__"):
            continue
        where.setdefault(idea_of(stem), set()).add(".".join(package))
    return {idea: sorted(p) for idea, p in where.items() if len(p) > most}


def test_no_idea_is_named_in_more_than_two_packages() -> None:
    assert ideas_in_many_packages(all_modules()) == {}


def test_the_naming_check_sees_an_idea_in_three_packages() -> None:
    modules = ["boxmaker.session.epochs", "boxmaker.loop.epoch", "boxmaker.cli.epochs",
               "boxmaker.loop.errors", "boxmaker.cli.errors", "boxmaker.store.errors"]  # fmt: skip
    assert ideas_in_many_packages(modules) == {"epoch": ["boxmaker.cli", "boxmaker.loop",
                                                         "boxmaker.session"]}  # fmt: skip
