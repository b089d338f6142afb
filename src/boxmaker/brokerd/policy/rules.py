"""The policy brokerd reads from `policy.toml`: each tool's grant, the roots beyond the workspace
the file tools may reach, the MCP servers' trust, and examples that prove it; `decide` (the
root, the grant or a `shell` rule, the session's grant) and `decide_mcp` (an MCP tool's pinned
definition), the steps `decide.py` composes. Pure: `load.py` reads the file, `write.py` writes
an `always`.

The one idea: a call is decided by where it lands before what it is. A file tool's path in no
root, or in a root that does not grant the access (read or write), is denied whatever the tool's
grant; only then does the grant decide (a `session` answer turns `ask`, never `deny`, to `allow`).

The file's format, its tables and their rules are `parse.py`'s; `parse_policy` makes the
`Policy` of them. Errors read as config.toml's do: `<file>: <what was expected> @ $.<key>`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import field, frozen

from ...proto import DataClass
from ..files.held_roots import resolve_folder
from ..files.roots import FILE_TOOLS, READS, Identity, Located, Root, locate
from ..registry import server_of
from ._toml import Decision, PolicyError
from ._toml import name as _name
from .commands import PrefixRule, decide_command
from .parse import NO_GRANT, parse_tables

__all__ = [
    "NO_GRANT",
    "SHIPPED_POLICY",
    "Decision",
    "Example",
    "Grant",
    "Policy",
    "PolicyError",
    "Verdict",
    "decide",
    "parse_policy",
    "read_policy",
]

SHIPPED_POLICY = resources.files("boxmaker").joinpath("policy.toml").read_text(encoding="utf-8")


@frozen
class Grant:
    """A tool's grant, and where it came from as `bxctl tools` shows it."""

    decision: Decision
    source: str  # "policy.toml [grants.write_file]", "default (no grant: ask)", "session", ...
    definition: str | None = None  # an MCP tool's allow holds only while it has this hash
    egress: bool = False


@frozen
class ServerTrust:
    """What the owner trusts of an MCP server (`[mcp.<name>]` in the policy)."""

    data_class: DataClass = DataClass.PRIVATE
    egress: bool = False
    trust_hints: bool = False


@frozen
class Verdict:
    """What becomes of one call: `reason` is a sentence the model may be told, `source` where
    the decision came from, `located` where a file tool's path lands (None for other tools)."""

    decision: Decision
    reason: str
    source: str
    located: Located | None = None
    note: str = ""  # why the owner is asked, when they would not expect it, shown with the ask
    only_once: bool = False  # asked by the session's `ask` mode: `once` or `deny`, no grant


@frozen
class Example:
    tool: str
    arguments: dict[str, Any]
    decision: Decision
    tainted: bool = False  # the conversation holds an untrusted result
    sandbox: bool = True  # the sandbox works


@frozen
class Policy:
    path: Path  # the file it was read from
    grants: dict[str, Grant]
    roots: tuple[Root, ...]
    workspace_class: DataClass
    examples: tuple[Example, ...]
    prefixes: tuple[PrefixRule, ...] = ()  # `shell`'s rules by command prefix
    unconfined: bool = False  # `[sandbox] unconfined`: run shell and run_cell without one
    servers: dict[str, ServerTrust] = field(factory=dict)  # `[mcp.<name>]`
    workspace_identity: Identity | None = field(default=None, eq=False)  # taken at load

    def server(self, name: str) -> ServerTrust:
        return self.servers.get(name, ServerTrust())

    def egress(self, tool: str, network: bool = False) -> bool:
        """Whether `tool` sends data out: its grant or its server says so, or its server
        reaches the network."""
        server = server_of(tool)
        by_server = server is not None and (network or self.server(server).egress)
        return by_server or self.grants.get(tool, Grant(Decision.ASK, "")).egress

    def grant(self, tool: str) -> Grant:
        """Its table's grant, else `ask`; `call_tool` is denied: the tool it runs decides."""
        if tool in NO_GRANT:
            decision = Decision.DENY if tool == "call_tool" else Decision.ALLOW
            return Grant(decision, f"core: {NO_GRANT[tool]}")
        return self.grants.get(tool, Grant(Decision.ASK, "default (no grant: ask)"))

    def workspace_root(self, workspace: PurePosixPath) -> Root:
        return Root(
            "workspace",
            workspace,
            read=True,
            write=True,
            data_class=self.workspace_class,
            identity=self.workspace_identity,
        )


def decide(
    policy: Policy,
    workspace: PurePosixPath,
    tool: str,
    arguments: dict[str, Any],
    session_grants: Collection[str] = (),
) -> Verdict:
    """The decision for one call of `tool` (the tool that runs, never `call_tool`) in a session
    whose owner allowed `session_grants` for its life. Never raises: a file tool without a
    string `path` is denied."""
    located = None
    if tool in FILE_TOOLS:
        path = arguments.get("path", "." if tool == "search_files" else None)
        if type(path) is not str:
            return Verdict(Decision.DENY, f"{tool} needs a path, as a string", "arguments")
        where = locate(path, policy.workspace_root(workspace), policy.roots)
        if isinstance(where, str):
            return Verdict(Decision.DENY, where, f"{policy.path.name} [roots]")
        root = where.root
        wanted, has = ("read", root.read) if tool in READS else ("write", root.write)
        if not has:
            granted = "read" if root.read else "write" if root.write else ""
            reason = f"{root.name} is granted {granted or 'neither read nor write'}"
            source = f"{policy.path.name} [roots.{_name(root.name)}]"
            return Verdict(Decision.DENY, reason + f", not {wanted}" * bool(granted), source, where)
        located = where
    grant = policy.grant(tool)
    by_rule = False
    if tool == "shell" and policy.prefixes:
        command = arguments.get("command")
        if type(command) is not str:
            return Verdict(Decision.DENY, "shell needs a command, as a string", "arguments")
        judged = decide_command(policy.prefixes, grant.decision, command)
        if judged.rule is not None:  # a rule's ask stays an ask: a session answer lifts only
            grant, by_rule = Grant(judged.decision, f"{grant.source}, {judged.rule}"), True
        elif judged.why is not None:  # asked, as the grant's ask is: a session answer lifts it
            grant = Grant(judged.decision, f"{grant.source}; {judged.why}")
    if grant.decision is Decision.ASK and tool in session_grants and not by_rule:
        grant = Grant(Decision.ALLOW, "session")
    verb = {Decision.ALLOW: "allows", Decision.DENY: "denies"}.get(grant.decision)
    said = f"the policy {verb} {tool}" if verb else f"{tool} needs the owner's approval"
    return Verdict(grant.decision, f"{said} ({grant.source})", grant.source, located)


def decide_mcp(
    policy: Policy, tool: str, definition: str, read_only: bool, session_grants: Collection[str]
) -> Verdict:
    """The decision for a call of the MCP tool `tool` (`<server>.<tool>`) as its server now
    defines it (`definition`, its hash), in this order: a deny; an allow for this definition;
    a session answer for this definition; an allow for another (or none), asked for again,
    saying why; the owner's ask; without a grant, allowed where the policy trusts the server's
    hints and the server says the tool only reads; else asked for."""
    grant = policy.grants.get(tool)
    where = f"{policy.path.name} [grants.{_name(tool)}]"
    if grant is not None and grant.decision is Decision.DENY:
        return Verdict(Decision.DENY, f"the policy denies {tool} ({where})", where)
    if grant is not None and grant.decision is Decision.ALLOW and grant.definition == definition:
        return Verdict(Decision.ALLOW, f"the policy allows {tool} ({where})", where)
    if f"{tool}@{definition}" in session_grants:
        return Verdict(Decision.ALLOW, f"the owner allowed {tool} for this session", "session")
    if grant is not None and grant.decision is Decision.ALLOW:
        if grant.definition is None:
            note = (
                f"its grant names no definition: answer 'always' to allow it as it is now "
                f"({definition[:12]})"
            )
        else:
            note = (
                f"its server changed its definition since it was allowed "
                f"({grant.definition[:12]}, now {definition[:12]}): a tool that changes "
                "after it was trusted is asked for again"
            )
        return Verdict(Decision.ASK, f"{tool} needs the owner's approval: {note}", where, note=note)
    if grant is not None:  # the owner's own ask: no hint of the server's lifts it
        return Verdict(Decision.ASK, f"{tool} needs the owner's approval ({where})", where)
    server = tool.partition(".")[0]  # `decide_mcp` is asked of an MCP tool alone
    if read_only and policy.server(server).trust_hints:
        where = f"{policy.path.name} [mcp.{_name(server)}] trust_hints"
        return Verdict(Decision.ALLOW, f"{server} says {tool} only reads ({where})", where)
    return Verdict(
        Decision.ASK,
        f"{tool} needs the owner's approval (an MCP tool with no grant)",
        "default (no grant: ask)",
    )


def parse_policy(
    text: str, path: Path, *, resolve: Callable[[str], Path] = resolve_folder
) -> Policy:
    """Parse the text of the policy file at `path`; `resolve` gives each root's folder from
    its absolute path (links followed) or raises ValueError saying why it has none.

    Raises:
        PolicyError: "<path>: <what> @ <key>" for bad TOML, unknown keys, wrong types or values.
    """
    try:
        tables = parse_tables(text, resolve)
    except PolicyError as exc:  # what is wrong, and its key: the file goes in front
        raise PolicyError(f"{path}: {exc}") from exc
    file = tables.file
    grants = {
        tool: Grant(
            grant.decision,
            f"{path.name} [grants.{_name(tool)}]",
            grant.definition or None,
            grant.egress,
        )
        for tool, grant in tables.grants.items()
    }
    examples = tuple(
        Example(e.tool, e.arguments, e.decision, e.tainted, e.sandbox) for e in file.examples
    )
    servers = {
        name: ServerTrust(s.data_class, s.egress, s.trust_hints) for name, s in file.mcp.items()
    }
    return Policy(
        path,
        grants,
        tables.roots,
        file.workspace.data_class,
        examples,
        tables.prefixes,
        file.sandbox.unconfined,
        servers,
    )


def read_policy(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")  # as is: no newline is translated
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise PolicyError(f"{path}: cannot read the policy: {reason}") from exc
