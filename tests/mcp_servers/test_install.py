"""An MCP server installed the ordinary way starts in the sandbox with nothing under `read`
(its venv, its npm prefix, the Python its script names, each shown read-only), a program the
sandbox still cannot see or that is nowhere is said in words that say what to do, and
`find_tool` asked while a server starts waits for its list, then says which servers are not
there yet (issue 40, points 8 and 9)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import attrs
import pytest
import trio

from boxmaker import proto as p
from boxmaker.brokerd import Broker, builtin_registry
from boxmaker.brokerd.files.roots import Root, shown_class
from boxmaker.brokerd.mcp.install import installed
from boxmaker.brokerd.policy.rules import parse_policy
from boxmaker.brokerd.sandbox.bwrap import Sandbox
from boxmaker.brokerd.sandbox.probe import find_sandbox
from boxmaker.clock import TickingClock
from boxmaker.config import McpServerConfig
from boxmaker.proto import DataClass

from ..helpers import given_over
from .conftest import (
    EVERYTHING,
    MCP_LIMITS,
    WAIT_S,
    Listed,
    bad,
    everything,
    make,
    outside_the_sandbox,
    running,
    time_server,
    until,
)

VENV_SCRIPT = Path(sys.prefix) / "bin" / "mcp-server-time"
NPM_BIN = EVERYTHING.parents[3] / ".bin" / "mcp-server-everything"


def test_a_venvs_script_shows_the_venv_and_the_python_it_was_made_from() -> None:
    program, trees = installed([str(VENV_SCRIPT)], "/usr/bin:/bin")
    assert program == str(VENV_SCRIPT)
    assert Path(sys.prefix) in trees  # the venv: its site-packages
    base = Path(sys.base_prefix).resolve()  # the Python it was made from
    shown = [*trees, Path("/usr")]  # (every sandbox shows the system's)
    assert any(base == tree or base.is_relative_to(tree) for tree in shown), trees


async def test_a_server_installed_in_a_venv_starts_with_nothing_under_read(
    mcp_sandbox: Sandbox,
) -> None:
    config = McpServerConfig(command=(str(VENV_SCRIPT), "--local-timezone", "UTC"))
    listed = Listed()
    server = make("time", config, mcp_sandbox, listed)
    with trio.fail_after(60):
        async with running(server):
            assert server.state == "ready"
    assert "time.get_current_time" in [tool.schema.name for tool in listed.tools["time"]]


async def test_a_server_installed_with_an_npm_prefix_starts_with_nothing_under_read(
    mcp_sandbox: Sandbox,
) -> None:
    everything()  # skipped (failed, in CI) where Node's server is not installed
    config = McpServerConfig(command=(str(NPM_BIN), "stdio"))
    server = make("everything", config, mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            assert server.state == "ready"
            assert "everything.echo" in server.tools


async def test_a_program_the_sandbox_cannot_see_is_said_with_what_to_add(
    mcp_sandbox: Sandbox, tmp_path: Path
) -> None:
    if not mcp_sandbox.working:
        pytest.skip(f"no sandbox here: {mcp_sandbox.reason}")
    script = tmp_path / "lost" / "server"
    script.parent.mkdir()
    script.write_text("#!interpreter-nowhere\n")  # a first line naming what no path reaches
    script.chmod(0o755)
    server = make("lost", McpServerConfig(command=(str(script),)), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server, ready=False):
            await until(server, lambda: server.state == "down", "down")
    assert "the sandbox cannot see its program" in server.reason
    assert "add the folder it is installed in to [mcp.lost] read" in server.reason


async def test_a_program_that_is_nowhere_says_where_it_was_looked_for(
    mcp_sandbox: Sandbox,
) -> None:
    server = make("nowhere", McpServerConfig(command=("bx-no-such-server",)), mcp_sandbox,
                  environ={"PATH": "/usr/bin:/bin"})  # fmt: skip
    with trio.fail_after(60):
        async with running(server, ready=False):
            await until(server, lambda: server.state == "down", "down")
    assert "bx-no-such-server is not found on brokerd's PATH (/usr/bin:/bin)" in server.reason
    assert "name it by its absolute path" in server.reason


def _broker(tmp_path: Path) -> Broker:
    (tmp_path / "ws").mkdir()
    (tmp_path / "home").mkdir()
    policy = parse_policy("", tmp_path / "policy.toml")
    return Broker(builtin_registry(()), policy, tmp_path / "ws", tmp_path / "home",
                  TickingClock(), threads=False)  # fmt: skip


async def find(broker: Broker, query: str) -> p.ResultResponse:
    request = p.ToolRequest(p.SessionId("s1"), 1, "find_tool", json.dumps({"query": query}))
    answer = await broker.call(request)
    assert isinstance(answer, p.ResultResponse), answer
    return answer


async def test_find_tool_waits_for_a_server_that_is_still_starting(
    mcp_sandbox: Sandbox, tmp_path: Path
) -> None:
    broker = _broker(tmp_path)
    server = make("bad", bad("slow"), mcp_sandbox, broker.update_tools)  # type: ignore[arg-type]
    broker.servers = {"bad": server}
    with trio.fail_after(WAIT_S * 2):
        async with running(server, ready=False):
            assert server.state == "starting"
            answer = await find(broker, "add two numbers")
    assert server.listed is not None
    assert '"bad.add"' in answer.content
    assert "Not there yet" not in answer.content


async def test_find_tool_says_which_servers_are_not_there_after_their_start_time(
    mcp_sandbox: Sandbox, tmp_path: Path
) -> None:
    broker = _broker(tmp_path)
    server = make("bad", bad("hang", start_timeout_s=1.0), mcp_sandbox,
                  broker.update_tools)  # type: ignore[arg-type]  # fmt: skip
    broker.servers = {"bad": server}
    with trio.fail_after(WAIT_S):
        async with running(server, ready=False):
            started = trio.current_time()
            answer = await find(broker, "add two numbers")
            waited = trio.current_time() - started
    assert waited <= 5  # its start time (1 s), not the call's
    assert "Not there yet, so not searched: the MCP servers bad (" in answer.content
    assert "ask again later" in answer.content
    assert broker.listing().servers[0].listed is None


def test_a_folder_too_wide_to_show_is_never_shown(tmp_path: Path) -> None:
    brokers = tmp_path / "me"
    (brokers / ".boxmaker").mkdir(parents=True)
    script = brokers / "server.py"  # beside brokerd's home: its folder holds it
    script.write_text("print('hi')\n")
    _program, trees = installed(["/usr/bin/python3", str(script), "/etc/hostname"], "/usr/bin",
                                guarded=[brokers / ".boxmaker"])  # fmt: skip
    assert trees == ()  # not `me` (it holds brokerd's home), not /etc (too wide)
    tool = tmp_path / "tools" / "bin" / "tool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert installed([str(tool)], "/usr/bin")[1] == (tmp_path / "tools",)  # above its bin


async def test_a_server_is_never_shown_a_folder_in_a_closed_root(
    mcp_sandbox: Sandbox, tmp_path: Path
) -> None:
    if not mcp_sandbox.working:
        pytest.skip(f"no sandbox here: {mcp_sandbox.reason}")
    vault = tmp_path / "vault"
    (vault / "inside").mkdir(parents=True)
    closed = Root("vault", PurePosixPath(vault), False, False, DataClass.PRIVATE,
                  (vault.stat().st_dev, vault.stat().st_ino))  # fmt: skip
    sandbox = attrs.evolve(mcp_sandbox, roots=(mcp_sandbox.workspace_root(), closed))
    config = attrs.evolve(bad(), read=(*bad().read, vault / "inside"))
    server = make("bad", config, sandbox)
    with trio.fail_after(60):
        async with running(server, ready=False):
            await until(server, lambda: server.state == "down", "down")
    assert f"it would be shown {vault / 'inside'}, which is in the root vault" in server.reason


def test_what_a_server_could_read_raises_its_results_class() -> None:
    ws = Root("workspace", PurePosixPath("/w"), True, True, DataClass.PUBLIC)
    papers = Root("papers", PurePosixPath("/srv/papers"), True, False, DataClass.PRIVATE)
    keys = Root("keys", PurePosixPath("/srv/data/keys"), False, False, DataClass.SECRET)
    roots = [ws, papers, keys]
    assert shown_class(roots) is DataClass.PUBLIC
    assert shown_class(roots, [PurePosixPath("/srv")]) is DataClass.PRIVATE  # papers inside
    assert shown_class(roots, [PurePosixPath("/srv/papers/a")]) is DataClass.PRIVATE  # in it


@pytest.fixture
def reachable_sandbox() -> Iterator[Sandbox]:
    """The machine's sandbox for a workspace every user can reach the path of (as a user's own
    workspace often is: pytest's folders are root's alone, which would hide the attack below
    from the sandbox's user), given to the sandbox's user."""
    folder = Path(tempfile.mkdtemp(prefix="bx-reachable-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        (folder / "workspace").mkdir()
        found = find_sandbox(folder / "workspace", MCP_LIMITS)
        if not found.working and os.environ.get("BOXMAKER_REQUIRE_SANDBOX"):
            pytest.fail(f"no sandbox here: {found.reason}")  # CI: a skip would hide it
        yield given_over(found)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("confined", [None, False], ids=["in the sandbox", "outside it"])
async def test_a_module_planted_in_the_workspace_is_never_what_a_server_imports(
    reachable_sandbox: Sandbox, confined: bool | None
) -> None:
    sandbox = reachable_sandbox
    if confined is None and not sandbox.working:
        pytest.skip(f"no sandbox here: {sandbox.reason}")
    planted = sandbox.workspace / "mcp_server_time"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "__main__.py").write_text("import sys\nprint('bx-planted', file=sys.stderr)\n"
                                         "sys.exit(3)\n")  # fmt: skip
    given_over(sandbox)
    config = attrs.evolve(time_server(), sandbox=confined)
    environ = None
    if confined is False:
        config, environ = outside_the_sandbox(config)
    listed = Listed()
    server = make("time", config, sandbox, listed, environ=environ)
    with trio.fail_after(60):
        async with running(server, ready=False):
            await until(server, lambda: server.state != "starting", "started or down")
    assert not any("bx-planted" in line for line in server.tail.lines()), server.tail.lines()
    assert server.state == "ready", server.reason
