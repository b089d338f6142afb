"""Tools as loopd sees them: their schemas, `dispatch` (who answers a call), the argument
check, the result cap, and the port that runs them (SPEC sections 6 and 14)."""

from ._dispatch import SAID_BY_DISPATCH, Port, answer_of, dispatch, local
from .arguments import check_arguments, schema_problem
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
from .port import ToolPort
from .results import ReadBack, cap_result, read_back
from .schemas import (
    BUILTIN_TOOLS,
    CALL_TOOL,
    CLOCK,
    CORE_TOOLS,
    ECHO,
    FILE_TOOLS,
    FIND_TOOL,
    READ_FILE,
    READ_RESULT,
    RUN_CELL,
    SANDBOXED_TOOLS,
    SHELL,
    definition_hash,
    session_tools,
)

__all__ = [
    "BUILTIN_TOOLS",
    "CALL_TOOL",
    "CLOCK",
    "CLOSE",
    "CORE_TOOLS",
    "ECHO",
    "FILE_TOOLS",
    "FIND_TOOL",
    "READ_FILE",
    "READ_RESULT",
    "RUN_CELL",
    "SAID_BY_DISPATCH",
    "SANDBOXED_TOOLS",
    "SHELL",
    "BlockCall",
    "FenceFilter",
    "PhraseFilter",
    "Port",
    "ReadBack",
    "ToolPort",
    "answer_of",
    "block_text",
    "cap_result",
    "check_arguments",
    "definition_hash",
    "dispatch",
    "local",
    "parse_blocks",
    "problem_texts",
    "read_back",
    "schema_problem",
    "session_tools",
    "tool_section",
]
