"""brokerd's answer to `list_tools`: every tool with its hash and grant, every root the file
tools may reach, and the MCP servers. When the MCP tools' schemas would not fit in a frame,
their parameters are left out of the listing (`find_tool` gives them). It does no I/O, but
reads the live servers' state (`McpServer`), so it is not counted among the pure rooms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..channel import MAX_FRAME
from ..proto import (
    ListedRoot,
    ListedServer,
    ListedTool,
    ToolSchema,
    ToolsFrame,
    encode,
    unstructure,
)
from ..tools import FIND_TOOL
from .files.roots import Root
from .policy.rules import Policy, decide_mcp
from .registry import Registry

if TYPE_CHECKING:  # the SDK is loaded only where a server is configured
    from .mcp.server import McpServer

__all__ = ["listing"]


def listing(
    registry: Registry,
    policy: Policy,
    roots: Sequence[Root],
    servers: Iterable[McpServer],
    checkpoints: Mapping[str, str] | None = None,
) -> ToolsFrame:
    """The listing, with the MCP tools' parameters while the frame holds them; `checkpoints`
    says, by root name, whether each writable root is checkpointed, or why not."""
    servers, said = list(servers), checkpoints or {}
    frame = _listing(registry, policy, roots, servers, said, with_parameters=True)
    if len(encode(unstructure(frame))) < MAX_FRAME * 3 // 4:
        return frame
    return _listing(registry, policy, roots, servers, said, with_parameters=False)


def _listing(
    registry: Registry,
    policy: Policy,
    roots: Sequence[Root],
    servers: Sequence[McpServer],
    checkpoints: Mapping[str, str],
    *,
    with_parameters: bool,
) -> ToolsFrame:
    listed = []
    for entry in registry.entries:
        grant = policy.grant(entry.schema.name)
        decision, source = grant.decision.value, grant.source
        if entry.schema.name == FIND_TOOL.name:
            decision, source = "allow", "always (a search of the registry)"
        elif entry.mcp is not None:
            verdict = decide_mcp(
                policy, entry.schema.name, entry.definition, entry.mcp.read_only, ()
            )
            decision, source = verdict.decision.value, verdict.reason
        schema = entry.schema
        if entry.mcp is not None and not with_parameters:
            schema = ToolSchema(schema.name, schema.description[:200], {})
        listed.append(ListedTool(schema, entry.definition, entry.core, decision, source))
    shown = [
        ListedRoot(
            root.name,
            str(root.path),
            root.read,
            root.write,
            root.data_class,
            checkpoints.get(root.name, ""),
        )
        for root in roots
    ]
    states = [
        ListedServer(s.name, s.state, s.reason, s.tools, s.restarts, s.stderr, s.listed)
        for s in (server.status() for server in servers)
    ]
    return ToolsFrame(tuple(listed), tuple(shown), tuple(states))
