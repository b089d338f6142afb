"""The registry: every tool brokerd holds, each with the hash of its definition, and the
search `find_tool` answers with (`tool_search`). Pure.

Which tools a session's baseline holds is the config's (`[tools] core`) and fixed when the
session is made; the registry only knows whether a tool may be core. The others, the MCP
servers' tools among them (never core), are found with `find_tool` and run with `call_tool`.
A registry is never changed: a server's new list makes a new one (`with_server`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum
from functools import cached_property

from attrs import frozen

from ..proto import ToolSchema
from ..tools import (
    BUILTIN_TOOLS,
    FILE_TOOLS,
    FIND_TOOL,
    MEMORY_TOOLS,
    SANDBOXED_TOOLS,
    SCHEDULE_TOOLS,
    definition_hash,
)
from .tool_search import ToolIndex

__all__ = [
    "MOST_FOUND",
    "SANDBOXED",
    "Kind",
    "McpTool",
    "Registry",
    "RegistryEntry",
    "builtin_registry",
    "entry_named",
    "kind_of",
    "server_of",
]

MOST_FOUND = 5  # schemas `find_tool` gives at once


class Kind(Enum):
    """Which of the policy's rules a tool's calls meet (`policy/decide.py`)."""

    BUILTIN = "builtin"  # `clock`, `echo`, `find_tool`: the grant alone
    FILE = "file"  # a file tool: the root its path lands in, then the grant
    SANDBOXED = "sandboxed"  # `shell`, `run_cell`: the grant (and `shell`'s rules), the sandbox
    MCP = "mcp"  # an MCP server's: the grant pinned to its definition, the server's hints
    MEMORY = "memory"  # `remember`, `forget`, `recall`: the grant; the notes kept from taint
    SCHEDULE = "schedule"  # `schedule`, `list_schedules`, `cancel_schedule`: the grant; taint


SANDBOXED = frozenset(tool.name for tool in SANDBOXED_TOOLS)
_KINDS = {
    **{tool.name: Kind.FILE for tool in FILE_TOOLS},
    **{tool.name: Kind.SANDBOXED for tool in SANDBOXED_TOOLS},
    **{tool.name: Kind.MEMORY for tool in MEMORY_TOOLS},
    **{tool.name: Kind.SCHEDULE for tool in SCHEDULE_TOOLS},
}


def server_of(tool: str) -> str | None:
    """The MCP server whose tool `tool` is (`<server>.<tool>`); None for brokerd's own tools,
    whose names hold no dot (config.toml refuses a server name with one)."""
    server, dot, _ = tool.partition(".")
    return server if dot else None


def kind_of(tool: str) -> Kind:
    if server_of(tool) is not None:
        return Kind.MCP
    return _KINDS.get(tool, Kind.BUILTIN)


@frozen
class McpTool:
    """One tool of an MCP server: its schema as the registry holds it (`<server>.<tool>`),
    its name on the server, and whether the server says it only reads (`readOnlyHint`)."""

    schema: ToolSchema
    remote: str
    read_only: bool


@frozen
class RegistryEntry:
    schema: ToolSchema
    definition: str  # `definition_hash(schema)`
    core: bool  # in every baseline (`clock`, `find_tool`) or by the config
    mcp: McpTool | None = None  # a tool of an MCP server: `<server>.<tool>`

    @classmethod
    def of(cls, schema: ToolSchema, core: bool, mcp: McpTool | None = None) -> RegistryEntry:
        return cls(schema, definition_hash(schema), core, mcp)

    @property
    def server(self) -> str | None:
        return server_of(self.schema.name) if self.mcp is not None else None

    @property
    def kind(self) -> Kind:
        return Kind.MCP if self.mcp is not None else kind_of(self.schema.name)


@frozen(eq=False)
class Registry:
    entries: tuple[RegistryEntry, ...]

    @cached_property
    def _by_name(self) -> dict[str, RegistryEntry]:
        return {entry.schema.name: entry for entry in self.entries}

    @cached_property
    def _searched(self) -> tuple[list[RegistryEntry], ToolIndex]:
        found = [e for e in self.entries if e.schema.name != FIND_TOOL.name]
        return found, ToolIndex([(e.schema.name, e.schema.description) for e in found])

    def get(self, name: str) -> RegistryEntry | None:
        return self._by_name.get(name)

    def find(self, query: str) -> tuple[list[ToolSchema], int]:
        """The tools best matching the words of `query` (BM25 over names and descriptions),
        at most `MOST_FOUND`; and how many more matched."""
        entries, index = self._searched
        places, count = index.search(query, MOST_FOUND)
        return [entries[place].schema for place in places], max(0, count - len(places))

    def with_server(self, server: str, tools: Sequence[McpTool]) -> Registry:
        """This registry with `server`'s tools replaced by `tools`."""
        kept = [entry for entry in self.entries if entry.server != server]
        added = [RegistryEntry.of(tool.schema, core=False, mcp=tool) for tool in tools]
        return Registry((*kept, *added))


def builtin_registry(core: Iterable[str] = ()) -> Registry:
    """brokerd's own tools: `clock` and `find_tool` (core in every baseline), `echo` and the
    file tools (core when the config names them in `core`)."""
    names = set(core)
    entries = [RegistryEntry.of(FIND_TOOL, core=True)]
    entries += [
        RegistryEntry.of(schema, core=schema.name == "clock" or schema.name in names)
        for schema in BUILTIN_TOOLS
    ]
    return Registry(tuple(entries))


def entry_named(tool: str, definition: str | None = None) -> RegistryEntry:
    """An entry for `tool` as a policy example names it: brokerd's own schema; an MCP tool as
    `definition` defines it (the one its grant pins, else none), with no read-only hint."""
    schema = next((s for s in (FIND_TOOL, *BUILTIN_TOOLS) if s.name == tool), None)
    if schema is None:
        schema = ToolSchema(name=tool, description="", parameters={"type": "object"})
    if (server := server_of(tool)) is None:
        return RegistryEntry.of(schema, core=False)
    mcp = McpTool(schema, tool.removeprefix(f"{server}."), read_only=False)
    return RegistryEntry(schema, definition or "", core=False, mcp=mcp)
