"""Tools: their schemas, the registry, `dispatch` (who answers a call), the result cap, and the
port that runs them (SPEC section 6)."""

from ._dispatch import SAID_BY_DISPATCH, Port, answer_of, dispatch, local
from .fenced import (
    CLOSE,
    BlockCall,
    FenceFilter,
    PhraseFilter,
    block_text,
    parse_blocks,
    problem_texts,
    tool_section,
)
from .port import FakeTools, ToolPort
from .registry import Registry, RegistryEntry, default_registry
from .results import ReadBack, cap_result, read_back
from .schemas import CALL_TOOL, CLOCK, CORE_TOOLS, ECHO, FIND_TOOL, READ_RESULT

__all__ = [
    "CALL_TOOL",
    "CLOCK",
    "CLOSE",
    "CORE_TOOLS",
    "ECHO",
    "FIND_TOOL",
    "READ_RESULT",
    "SAID_BY_DISPATCH",
    "BlockCall",
    "FakeTools",
    "FenceFilter",
    "PhraseFilter",
    "Port",
    "ReadBack",
    "Registry",
    "RegistryEntry",
    "ToolPort",
    "answer_of",
    "block_text",
    "cap_result",
    "default_registry",
    "dispatch",
    "local",
    "parse_blocks",
    "problem_texts",
    "read_back",
    "tool_section",
]
