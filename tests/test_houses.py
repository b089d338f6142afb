"""Each daemon in its own house (docs/architecture.md): a fresh interpreter that imports one
daemon's entry point holds nothing of the other's. brokerd holds every authority and none of
loopd's turn loop, inference client or cache; it loads the `mcp` SDK (and the httpx and pydantic
it brings) only when an MCP server is configured. loopd holds no sandbox, MCP or policy. Each
check is seen to fail on an import planted in a copy of the tree. gatewayd, a channel, holds
nothing of loopd, brokerd or bxctl: it reaches loopd over `loop.sock` through `client`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"

BROKERD = "boxmaker.brokerd.main"
LOOPD = "boxmaker.loopd.main"
GATEWAYD = "boxmaker.gatewayd.main"
NOT_IN_BROKERD = (
    "boxmaker.loopd",  # the turn loop, `infer` and `cache` are its rooms
    "mcp",
    "mcp_types",
    "pydantic",
    "httpx",
    "httpcore",
)
NOT_IN_GATEWAYD = (
    "boxmaker.loopd",  # a channel: it reaches loopd over loop.sock, as bxctl does
    "boxmaker.brokerd",  # no tool and no grant
    "boxmaker.cli",
    "mcp",
    "pydantic",
    "tree_sitter",
)
NOT_IN_LOOPD = (
    "boxmaker.brokerd",  # the sandbox, MCP and the policy are its rooms
    "mcp",
    "pydantic",
    "tree_sitter",
)


def loaded(module: str, src: Path = SRC, then: str = "") -> set[str]:
    """The modules a fresh interpreter holds after importing `module` from `src` (and running
    `then`)."""
    code = f"import sys, {module}\n{then}\nprint('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )
    return set(result.stdout.split())


def foreign(names: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        n for n in names if n in forbidden or n.startswith(tuple(f + "." for f in forbidden))
    )


def test_brokerd_loads_nothing_of_loopd_nor_the_mcp_sdk() -> None:
    names = loaded(BROKERD)
    assert foreign(names, NOT_IN_BROKERD) == []
    assert "boxmaker.brokerd.service" in names  # the check sees what it does load


def test_brokerd_loads_the_mcp_sdk_when_a_server_is_configured() -> None:
    # brokerd's start takes `McpServer` from its package only when `[mcp]` names a server.
    names = loaded(BROKERD, then="from boxmaker.brokerd import McpServer")
    assert "mcp" in names
    assert foreign(names, ("boxmaker.loopd",)) == []


def test_loopd_loads_no_sandbox_mcp_or_policy() -> None:
    names = loaded(LOOPD)
    assert foreign(names, NOT_IN_LOOPD) == []
    assert "boxmaker.loopd.loop.turn" in names


def test_gatewayd_loads_nothing_of_loopd_brokerd_or_bxctl() -> None:
    names = loaded(GATEWAYD)
    assert foreign(names, NOT_IN_GATEWAYD) == []
    assert "boxmaker.gatewayd.desk" in names
    assert "boxmaker.client" in names  # loopd is reached as bxctl reaches it


@pytest.mark.parametrize(
    ("entry", "planted", "forbidden"),
    [
        ("brokerd/main.py", "from ..loopd.loop import turn", NOT_IN_BROKERD),
        ("brokerd/main.py", "from ..loopd.infer import client", NOT_IN_BROKERD),
        ("brokerd/main.py", "from ..loopd.cache import watch", NOT_IN_BROKERD),
        ("brokerd/main.py", "from . import McpServer", NOT_IN_BROKERD),
        ("loopd/main.py", "from ..brokerd.sandbox import bwrap", NOT_IN_LOOPD),
        ("loopd/main.py", "from ..brokerd.mcp import adapt", NOT_IN_LOOPD),
        ("loopd/main.py", "from ..brokerd.policy import rules", NOT_IN_LOOPD),
        ("gatewayd/main.py", "from ..loopd.loop import turn", NOT_IN_GATEWAYD),
        ("gatewayd/main.py", "from ..brokerd import registry", NOT_IN_GATEWAYD),
    ],
)
def test_each_check_sees_a_planted_import(
    tmp_path: Path, entry: str, planted: str, forbidden: tuple[str, ...]
) -> None:
    copy = tmp_path / "src"
    shutil.copytree(
        SRC / "boxmaker", copy / "boxmaker", ignore=shutil.ignore_patterns("__pycache__")
    )
    path = copy / "boxmaker" / entry
    path.write_text(path.read_text() + f"\n{planted}  # noqa: E402\n")
    module = "boxmaker." + entry.removesuffix(".py").replace("/", ".")
    assert foreign(loaded(module, copy), forbidden) != []
