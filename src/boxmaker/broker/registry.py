"""The registry: every tool brokerd holds, each with the hash of its definition, and the
search `find_tool` answers with. Pure.

Which tools a session's baseline holds is the config's (`[tools] core`) and fixed when the
session is made; the registry only knows whether a tool may be core. The others are found
with `find_tool` and run with `call_tool`.
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from ..proto import ToolSchema
from ..tools import BUILTIN_TOOLS, FIND_TOOL, definition_hash

__all__ = ["MOST_FOUND", "Registry", "RegistryEntry", "builtin_registry"]

MOST_FOUND = 5  # schemas `find_tool` gives at once


@frozen
class RegistryEntry:
    schema: ToolSchema
    definition: str  # `definition_hash(schema)`
    core: bool  # in every baseline (`clock`, `find_tool`) or by the config

    @classmethod
    def of(cls, schema: ToolSchema, core: bool) -> RegistryEntry:
        return cls(schema, definition_hash(schema), core)


@frozen
class Registry:
    entries: tuple[RegistryEntry, ...]

    def get(self, name: str) -> RegistryEntry | None:
        return next((e for e in self.entries if e.schema.name == name), None)

    def find(self, query: str) -> tuple[list[ToolSchema], int]:
        """The tools whose name or description holds a word of `query` (ignoring case), the
        most words first, at most `MOST_FOUND`; and how many more matched."""
        words = [word for word in query.casefold().split() if word]
        scored: list[tuple[int, int, ToolSchema]] = []
        for order, entry in enumerate(self.entries):
            if entry.schema.name == FIND_TOOL.name:
                continue
            text = f"{entry.schema.name} {entry.schema.description}".casefold()
            text_alt = text.replace("_", " ")
            score = sum(word in text or word in text_alt for word in words)
            if score:
                scored.append((-score, order, entry.schema))
        scored.sort(key=lambda item: item[:2])
        found = [schema for _score, _order, schema in scored]
        return found[:MOST_FOUND], max(0, len(found) - MOST_FOUND)


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
