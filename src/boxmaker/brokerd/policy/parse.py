"""`policy.toml` read into its tables (`parse_tables`): TOML, then the one converter structures the
file's shape below, as config.toml's is (an unknown key refused, each value of its type), then
the rules no type can say: the tools that take no grant, a root that is not the workspace, is
absolute, resolves to a folder (by the caller's `resolve`) and is no other root's. Pure but for
`resolve`; `rules.py` makes the `Policy` of the tables.

The format (TOML; any table or key may be left out, an unknown one is refused):

    [grants.<tool>]         # a tool that runs (not find_tool, call_tool, read_result)
    decision = "allow"      # "allow" | "ask" | "deny"; a tool with no table: "ask"
    egress = false          # it sends data out: asked while an untrusted result is in view
    definition = "<hash>"   # an MCP tool's allow holds for this definition only (bxctl tools)
    [[grants.shell.prefixes]]  # shell's rules by command prefix (commands.py)
    prefix = ["git", "push"]
    decision = "ask"
    [mcp.<server>]          # the trust of an MCP server's tools (<server>.<tool>)
    class = "private"       # its results' class (default "private")
    egress = false          # every tool of it sends data out (a server with network is)
    trust_hints = false     # its tools that say they only read (readOnlyHint) are allowed
    [roots.<name>]          # a folder beyond the workspace; <name> is not "workspace"
    path = "/home/me/notes" # absolute; an existing folder, resolved (links followed) at load
    read = true             # read_file, list_dir, search_files may reach it (default true)
    write = false           # write_file, edit_file may (default false)
    class = "private"       # "public" | "private" | "secret" (default "private")
    [workspace]
    class = "private"       # the workspace's own class (default "private")
    [sandbox]
    unconfined = false      # with no sandbox here, shell and run_cell ask, then run without
    [[examples]]            # a call and the decision it must get, checked when it loads
    tool = "read_file"
    arguments = { path = "/etc/passwd" }  # default {}
    tainted = false         # the conversation holds an untrusted result (default false)
    sandbox = true          # the sandbox works (default true)
    decision = "deny"

Errors read as config.toml's do (`config.mistakes`): `<what was expected> @ $.<key>`, and an
unknown key near a known one adds "did you mean ...?". Which keys a grant may hold depends on
its tool (only shell's has `prefixes`), so each grant's table is structured by its name.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import field, frozen

from ...config import mistakes
from ...proto import DataClass, DecodeError, structure
from ..files.roots import Root
from ._toml import Decision, PolicyError, key, shown
from .commands import PrefixRule

__all__ = [
    "NO_GRANT",
    "ExampleTable",
    "GrantTable",
    "PolicyFile",
    "PolicyTables",
    "RootTable",
    "SandboxTable",
    "ServerTable",
    "ShellGrantTable",
    "WorkspaceTable",
    "parse_tables",
]

# The core tools that run no tool of their own, and so take no grant.
NO_GRANT = {
    "find_tool": "it only searches the registry",
    "call_tool": "the grant of the tool it runs applies",
    "read_result": "loopd answers it from the session's own results",
}


@frozen
class GrantTable:
    """`[grants.<tool>]`."""

    decision: Decision
    egress: bool = False
    definition: str = ""  # empty: none


@frozen
class ShellGrantTable(GrantTable):
    """`[grants.shell]`, the one grant with rules."""

    prefixes: tuple[PrefixRule, ...] = ()  # `[[grants.shell.prefixes]]`


@frozen
class RootTable:
    """`[roots.<name>]`: `path` as written, resolved after."""

    path: str
    read: bool = True
    write: bool = False
    data_class: DataClass = DataClass.PRIVATE  # `class`


@frozen
class WorkspaceTable:
    data_class: DataClass = DataClass.PRIVATE  # `class`


@frozen
class ExampleTable:
    """`[[examples]]`."""

    tool: str
    decision: Decision
    arguments: dict[str, Any] = field(factory=dict)
    tainted: bool = False
    sandbox: bool = True


@frozen
class ServerTable:
    """`[mcp.<name>]`."""

    data_class: DataClass = DataClass.PRIVATE  # `class`
    egress: bool = False
    trust_hints: bool = False


@frozen
class SandboxTable:
    unconfined: bool = False


@frozen
class PolicyFile:
    """The file as written, each table of its type but the grants': each of those is a table
    whose keys hang on its tool's name, structured apart (`GrantTable`, `ShellGrantTable`)."""

    grants: dict[str, dict[str, Any]] = field(factory=dict)
    roots: dict[str, RootTable] = field(factory=dict)
    workspace: WorkspaceTable = WorkspaceTable()
    examples: tuple[ExampleTable, ...] = ()
    mcp: dict[str, ServerTable] = field(factory=dict)
    sandbox: SandboxTable = SandboxTable()


@frozen
class PolicyTables:
    """What the file says, every rule checked: its tables, each tool's grant, the roots resolved
    (in the file's order) and shell's rules."""

    file: PolicyFile
    grants: dict[str, GrantTable]
    roots: tuple[Root, ...]
    prefixes: tuple[PrefixRule, ...]


def parse_tables(text: str, resolve: Callable[[str], Path]) -> PolicyTables:
    """The tables of the policy text; `resolve` gives each root's folder from its absolute path
    (links followed) or raises ValueError saying why it has none.

    Raises:
        PolicyError: "<what> @ <key>" for bad TOML, unknown keys, wrong types or values (every
            mistake the converter finds, joined by "; "; then the first that breaks a rule);
            the caller puts the file in front.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"not valid TOML: {exc}") from exc
    try:
        file = structure(raw, PolicyFile)
    except DecodeError as exc:
        raise PolicyError("; ".join(mistakes(exc))) from exc
    grants = _grants(file.grants)
    shell = grants.get("shell")
    prefixes = shell.prefixes if isinstance(shell, ShellGrantTable) else ()
    return PolicyTables(file, grants, _roots(file.roots, resolve), prefixes)


def _grants(tables: dict[str, dict[str, Any]]) -> dict[str, GrantTable]:
    grants: dict[str, GrantTable] = {}
    said: list[str] = []
    for tool, table in tables.items():
        if tool in NO_GRANT:
            said.append(f"{tool} takes no grant: {NO_GRANT[tool]} @ {key('grants', tool)}")
            continue
        try:
            grants[tool] = structure(table, ShellGrantTable if tool == "shell" else GrantTable)
        except DecodeError as exc:
            said += mistakes(exc, "grants", tool)
    if said:
        raise PolicyError("; ".join(said))
    return grants


def _roots(tables: dict[str, RootTable], resolve: Callable[[str], Path]) -> tuple[Root, ...]:
    roots: list[Root] = []
    for name, table in tables.items():
        if name == "workspace":
            raise PolicyError(
                f'"workspace" names the workspace itself: choose another @ {key("roots", name)}'
            )
        at = key("roots", name, "path")
        if not PurePosixPath(table.path).is_absolute():
            raise PolicyError(f"expected an absolute path, got {shown(table.path)} @ {at}")
        try:
            folder = PurePosixPath(resolve(table.path))
        except ValueError as exc:
            raise PolicyError(
                f"expected an existing folder, got {shown(table.path)} ({exc}) @ {at}"
            ) from exc
        for other in roots:
            if other.path == folder:
                raise PolicyError(f"{folder} is root {other.name} already @ {at}")
        roots.append(
            Root(name, folder, read=table.read, write=table.write, data_class=table.data_class)
        )
    return tuple(roots)
