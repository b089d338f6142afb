"""The registry: every tool a session may reach. Core tools are in the baseline; the rest are
found with `find_tool` and run with `call_tool`. Pure.
"""

from __future__ import annotations

from attrs import frozen

from ..proto import ToolSchema
from .schemas import CLOCK, ECHO

__all__ = ["Registry", "RegistryEntry", "default_registry"]


@frozen
class RegistryEntry:
    schema: ToolSchema
    core: bool


@frozen
class Registry:
    """Every tool a session may reach; core tools are in the baseline, the rest behind
    `find_tool` and `call_tool`."""

    entries: tuple[RegistryEntry, ...]

    def get(self, name: str) -> RegistryEntry | None:
        return next((e for e in self.entries if e.schema.name == name), None)

    def find(self, query: str) -> list[ToolSchema]:
        """Non-core tools whose name or description holds `query`, ignoring case."""
        wanted = query.casefold()
        return [
            e.schema
            for e in self.entries
            if not e.core
            and (wanted in e.schema.name.casefold() or wanted in e.schema.description.casefold())
        ]


def default_registry() -> Registry:
    return Registry((RegistryEntry(CLOCK, core=True), RegistryEntry(ECHO, core=False)))
