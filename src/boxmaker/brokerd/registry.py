"""The registry: every tool brokerd holds, each with the hash of its definition, and the
search `find_tool` answers with (`tool_search`). Pure.

Which tools a session's baseline holds is the config's (`[tools] core`) and fixed when the
session is made; the registry only knows whether a tool may be core. The others, the MCP
servers' tools among them (never core), are found with `find_tool` and run with `call_tool`.
A registry is never changed: a server's new list makes a new one (`with_server`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property

from attrs import frozen

from ..proto import ToolSchema
from ..tools import BUILTIN_TOOLS, FIND_TOOL, definition_hash
from .tool_search import ToolIndex

__all__ = ["MOST_FOUND", "McpTool", "Registry", "RegistryEntry", "builtin_registry"]

MOST_FOUND = 5  # schemas `find_tool` gives at once


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
        return self.schema.name.partition(".")[0] if self.mcp is not None else None


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
