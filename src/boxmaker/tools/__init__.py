"""Tools: their schemas, the registry, `dispatch` (who answers a call), the result cap, and the
port that runs them (SPEC section 6)."""

from .dispatch import TRUNCATED, Port, answer_of, cap_result, dispatch, local
from .port import FakeTools, ToolPort
from .registry import Registry, RegistryEntry, default_registry
from .schemas import CALL_TOOL, CLOCK, CORE_TOOLS, ECHO, FIND_TOOL

__all__ = [
    "CALL_TOOL",
    "CLOCK",
    "CORE_TOOLS",
    "ECHO",
    "FIND_TOOL",
    "TRUNCATED",
    "FakeTools",
    "Port",
    "Registry",
    "RegistryEntry",
    "ToolPort",
    "answer_of",
    "cap_result",
    "default_registry",
    "dispatch",
    "local",
]
