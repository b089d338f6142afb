"""The policy brokerd reads from `policy.toml`: each tool's grant, the roots beyond the workspace
the file tools may reach, the MCP servers' trust, and examples that prove it; `decide` (the
root, the grant or a `shell` rule, the session's grant) and `decide_mcp` (an MCP tool's pinned
definition), the steps `decide.py` composes. Pure: `load.py` reads the file, `write.py` writes
an `always`.

The one idea: a call is decided by where it lands before what it is. A file tool's path in no
root, or in a root that does not grant the access (read or write), is denied whatever the tool's
grant; only then does the grant decide (a `session` answer turns `ask`, never `deny`, to `allow`).

The format (TOML; any table or key may be left out, an unknown one is refused):

    [grants.<tool>]         # a tool that runs (not find_tool, call_tool, read_result)
    decision = "allow"      # "allow" | "ask" | "deny"; a tool with no table: "ask"
    egress = false          # it sends data out: asked while an untrusted result is in view
    definition = "<hash>"   # an MCP tool's allow holds for this definition only (bxctl tools)
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
    [[examples]]            # a call and the decision it must get, checked when it loads
    tool = "read_file"
    arguments = { path = "/etc/passwd" }  # default {}
    tainted = false         # the conversation holds an untrusted result (default false)
    sandbox = true          # the sandbox works (default true)
    decision = "deny"

Errors read as config.toml's do: `<file>: <what was expected> @ $.<key>`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Collection
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import field, frozen

from ...proto import DataClass
from ..files.held_roots import resolve_folder
from ..files.roots import FILE_TOOLS, READS, Identity, Located, Root, locate
from ..registry import server_of
from ._toml import REQUIRED as _REQUIRED
from ._toml import Decision, PolicyError
from ._toml import key as _key
from ._toml import name as _name
from ._toml import shown as _shown
from ._toml import table as _table
from ._toml import value as _value
from .commands import PrefixRule, decide_command

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
]  # fmt: skip

SHIPPED_POLICY = resources.files("boxmaker").joinpath("policy.toml").read_text(encoding="utf-8")

# The core tools that run no tool of their own, and so take no grant.
NO_GRANT = {
    "find_tool": "it only searches the registry",
    "call_tool": "the grant of the tool it runs applies",
    "read_result": "loopd answers it from the session's own results",
}


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
        return Root("workspace", workspace, read=True, write=True, data_class=self.workspace_class,
                    identity=self.workspace_identity)  # fmt: skip


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
            note = (f"its grant names no definition: answer 'always' to allow it as it is now "
                    f"({definition[:12]})")  # fmt: skip
        else:
            note = (f"its server changed its definition since it was allowed "
                    f"({grant.definition[:12]}, now {definition[:12]}): a tool that changes "
                    "after it was trusted is asked for again")  # fmt: skip
        return Verdict(Decision.ASK, f"{tool} needs the owner's approval: {note}", where,
                       note=note)  # fmt: skip
    if grant is not None:  # the owner's own ask: no hint of the server's lifts it
        return Verdict(Decision.ASK, f"{tool} needs the owner's approval ({where})", where)
    server = tool.partition(".")[0]  # `decide_mcp` is asked of an MCP tool alone
    if read_only and policy.server(server).trust_hints:
        where = f"{policy.path.name} [mcp.{_name(server)}] trust_hints"
        return Verdict(Decision.ALLOW, f"{server} says {tool} only reads ({where})", where)
    return Verdict(Decision.ASK, f"{tool} needs the owner's approval (an MCP tool with no "
                   "grant)", "default (no grant: ask)")  # fmt: skip


def parse_policy(
    text: str, path: Path, *, resolve: Callable[[str], Path] = resolve_folder
) -> Policy:
    """Parse the text of the policy file at `path`; `resolve` gives each root's folder from
    its absolute path (links followed) or raises ValueError saying why it has none.

    Raises:
        PolicyError: "<path>: <what> @ <key>" for bad TOML, unknown keys, wrong types or values.
    """
    try:
        return _policy(tomllib.loads(text), path, resolve)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{path}: not valid TOML: {exc}") from exc
    except PolicyError as exc:  # what is wrong, and its key: the file goes in front
        raise PolicyError(f"{path}: {exc}") from exc


def _policy(raw: dict[str, Any], path: Path, resolve: Callable[[str], Path]) -> Policy:
    _table(raw, (), ("grants", "roots", "workspace", "examples", "sandbox", "mcp"))
    grants: dict[str, Grant] = {}
    prefixes: list[PrefixRule] = []
    for tool, table in _table(raw.get("grants", {}), ("grants",)).items():
        if tool in NO_GRANT:
            raise PolicyError(f"{tool} takes no grant: {NO_GRANT[tool]} @ {_key('grants', tool)}")
        at = ("grants", tool)
        keys = ("decision", "egress", "definition", *(("prefixes",) if tool == "shell" else ()))
        _table(table, at, keys)
        prefixes += _prefixes(table.get("prefixes", []), (*at, "prefixes"))
        source = f"{path.name} [grants.{_name(tool)}]"
        decision = _value(table, "decision", Decision, _REQUIRED, *at)
        definition = _value(table, "definition", str, "", *at) or None
        grants[tool] = Grant(
            decision, source, definition, _value(table, "egress", bool, False, *at)
        )
    roots: list[Root] = []
    for name, table in _table(raw.get("roots", {}), ("roots",)).items():
        at = ("roots", name)
        if name == "workspace":
            raise PolicyError(
                f'"workspace" names the workspace itself: choose another @ {_key(*at)}'
            )
        _table(table, at, ("path", "read", "write", "class"))
        given = _value(table, "path", str, _REQUIRED, *at)
        if not PurePosixPath(given).is_absolute():
            raise PolicyError(
                f"expected an absolute path, got {_shown(given)} @ {_key(*at, 'path')}"
            )
        try:
            folder = PurePosixPath(resolve(given))
        except ValueError as exc:
            raise PolicyError(
                f"expected an existing folder, got {_shown(given)} ({exc}) @ {_key(*at, 'path')}"
            ) from exc
        for other in roots:
            if other.path == folder:
                raise PolicyError(f"{folder} is root {other.name} already @ {_key(*at, 'path')}")
        read = _value(table, "read", bool, True, *at)
        write = _value(table, "write", bool, False, *at)
        data_class = _value(table, "class", DataClass, "private", *at)
        roots.append(Root(name, folder, read=read, write=write, data_class=data_class))
    workspace = _table(raw.get("workspace", {}), ("workspace",), ("class",))
    workspace_class = _value(workspace, "class", DataClass, "private", "workspace")
    examples: list[Example] = []
    for index, table in enumerate(_array(raw.get("examples", []), ("examples",))):
        where = ("examples", index)
        _table(table, where, ("tool", "arguments", "decision", "tainted", "sandbox"))
        tool = _value(table, "tool", str, _REQUIRED, *where)
        arguments = _table(table.get("arguments", {}), (*where, "arguments"))
        decision = _value(table, "decision", Decision, _REQUIRED, *where)
        tainted = _value(table, "tainted", bool, False, *where)
        sandbox = _value(table, "sandbox", bool, True, *where)
        examples.append(Example(tool, arguments, decision, tainted, sandbox))
    servers = {}
    for name, table in _table(raw.get("mcp", {}), ("mcp",)).items():
        at = ("mcp", name)
        _table(table, at, ("class", "egress", "trust_hints"))
        servers[name] = ServerTrust(
            _value(table, "class", DataClass, "private", *at),
            _value(table, "egress", bool, False, *at),
            _value(table, "trust_hints", bool, False, *at),
        )
    sandbox = _table(raw.get("sandbox", {}), ("sandbox",), ("unconfined",))
    unconfined = _value(sandbox, "unconfined", bool, False, "sandbox")
    return Policy(path, grants, tuple(roots), workspace_class, tuple(examples), tuple(prefixes),
                  unconfined, servers)  # fmt: skip


def _array(listed: Any, at: tuple[str | int, ...]) -> list[Any]:
    if type(listed) is not list:
        raise PolicyError(f"expected an array of tables, got {_shown(listed)} @ {_key(*at)}")
    return listed


def _prefixes(listed: Any, at: tuple[str | int, ...]) -> list[PrefixRule]:
    rules = []
    for index, table in enumerate(_array(listed, at)):
        where = (*at, index)
        _table(table, where, ("prefix", "decision"))
        prefix = _value(table, "prefix", list, _REQUIRED, *where)
        if not prefix or not all(type(word) is str and word for word in prefix):
            raise PolicyError(f"expected words, got {_shown(prefix)} @ {_key(*where, 'prefix')}")
        rules.append(PrefixRule(tuple(prefix), _value(table, "decision", Decision, _REQUIRED,
                                                      *where)))  # fmt: skip
    return rules


def read_policy(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")  # as is: no newline is translated
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise PolicyError(f"{path}: cannot read the policy: {reason}") from exc
