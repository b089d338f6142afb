"""MCP servers for the tests: the project's misbehaving one (`bad_server.py`), and published
ones at pinned versions (`mcp-server-time` from the test extra, `server-everything` from
`package-lock.json`, installed by `make test` into `.venv/mcp-node`).

Each server runs in the real sandbox where this machine has one (as brokerd runs them by
default), else outside it; with `BOXMAKER_REQUIRE_SANDBOX` set (CI) a missing sandbox fails,
and with `BOXMAKER_REQUIRE_MCP` set a missing Node server fails rather than skips.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from boxmaker.brokerd.mcp.server import McpServer
from boxmaker.brokerd.registry import McpTool
from boxmaker.brokerd.sandbox.bwrap import Sandbox, SandboxLimits
from boxmaker.brokerd.sandbox.probe import find_sandbox
from boxmaker.config import McpServerConfig, SandboxConfig

HERE = Path(__file__).parent
REPO = HERE.parent.parent
EVERYTHING = (REPO / ".venv/mcp-node/node_modules/@modelcontextprotocol/server-everything"
              / "dist/index.js")  # fmt: skip
# What a Python server needs to see: the venv, the Python it was made from, this folder.
PYTHON_READ = tuple(dict.fromkeys(Path(p).resolve() for p in (sys.prefix, sys.base_prefix)))
MCP_LIMITS = SandboxLimits.of(SandboxConfig(memory_mb=512, processes=64, tmp_mb=8))
WAIT_S = 30.0


def bad(mode: str = "serve", **config: Any) -> McpServerConfig:
    """The misbehaving server's config."""
    settings: dict[str, Any] = {"timeout_s": 20.0, "start_timeout_s": 20.0} | config
    return McpServerConfig(command=(sys.executable, str(HERE / "bad_server.py"), mode),
                           read=(*PYTHON_READ, HERE), **settings)  # fmt: skip


def readable_by_all(path: Path) -> bool:
    """Whether any user can reach `path` (every folder above it searchable by others) and
    read it."""
    path = path.resolve()
    folders_ok = all(folder.stat().st_mode & 0o001 for folder in path.parents)
    return folders_ok and bool(path.stat().st_mode & 0o004)


def outside_the_sandbox(config: McpServerConfig) -> tuple[McpServerConfig, dict[str, str]]:
    """`config` run outside the sandbox, and the environment brokerd passes it. As root that
    run is the sandbox's user, who cannot reach a Python under root's own home: then the
    system's `python3` runs it, with this venv's packages on its path."""
    config = attrs.evolve(config, sandbox=False)
    if os.geteuid() != 0 or readable_by_all(Path(sys.executable)):
        return config, dict(os.environ)
    packages = [Path(p) for p in sys.path if p.endswith("site-packages")]
    system = Path("/usr/bin/python3")
    reachable = [*packages, REPO / "src", HERE]
    if not system.exists() or not all(readable_by_all(p) for p in reachable):
        pytest.skip(
            "as root, a server outside the sandbox runs as the sandbox's user, and this "
            "checkout or its packages are not readable by other users"
        )
    command = (str(system), *config.command[1:])
    path = ":".join(str(p) for p in reachable)
    return attrs.evolve(config, command=command, env=("PYTHONPATH",)), {"PYTHONPATH": path}


def time_server(**config: Any) -> McpServerConfig:
    command = (sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")
    return McpServerConfig(command=command, read=PYTHON_READ, **config)


def everything(**config: Any) -> McpServerConfig:
    if not EVERYTHING.exists():
        message = f"{EVERYTHING} is not installed (make mcp-servers; it needs npm)"
        if os.environ.get("BOXMAKER_REQUIRE_MCP"):
            pytest.fail(message)
        pytest.skip(message)
    command = ("node", str(EVERYTHING), "stdio")
    return McpServerConfig(command=command, read=(EVERYTHING.parents[3],), **config)


@pytest.fixture
def mcp_sandbox(tmp_path: Path) -> Sandbox:
    """The machine's sandbox (or, where it has none, the object that says why)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    found = find_sandbox(workspace, MCP_LIMITS)
    if not found.working and os.environ.get("BOXMAKER_REQUIRE_SANDBOX"):
        pytest.fail(f"no sandbox here: {found.reason}")
    return found


class Listed:
    """What the servers gave the registry, as the broker's `update_tools` would get it."""

    def __init__(self) -> None:
        self.tools: dict[str, list[McpTool]] = {}
        self.times = 0

    def __call__(self, server: str, tools: Sequence[McpTool]) -> None:
        self.tools[server] = list(tools)
        self.times += 1


async def until(
    server: McpServer, done: Callable[[], bool], what: str, timeout: float = WAIT_S
) -> None:
    """Wait until `done` holds, checked at each change of `server`, within `timeout`."""
    with trio.move_on_after(timeout):
        while not done():
            await server.changed.wait()
        return
    raise AssertionError(f"{what} never came within {timeout:g} s ({server.status()})")


@asynccontextmanager
async def running(server: McpServer, *, ready: bool = True) -> AsyncIterator[McpServer]:
    """`server` kept running for the block (and waited for until ready, unless not)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.run)
        if ready:
            await until(server, lambda: server.state == "ready", f"{server.name} ready")
        yield server
        nursery.cancel_scope.cancel()


def make(
    name: str, config: McpServerConfig, sandbox: Sandbox, listed: Listed | None = None, **kw: Any
) -> McpServer:
    settings: dict[str, Any] = {"call_limit": 60.0, "backoff": 0.05} | kw
    return McpServer(name, config, sandbox, listed or Listed(), **settings)
