"""The tools' schemas as the model sees them: the four core tools every baseline made now
holds (fixed for the epoch; sessions made before `read_result` keep their three), and
`echo`, the one tool behind `find_tool` in this milestone. Pure.
"""

from __future__ import annotations

from ..proto import ToolSchema

__all__ = ["CALL_TOOL", "CLOCK", "CORE_TOOLS", "ECHO", "FIND_TOOL", "READ_RESULT"]

CLOCK = ToolSchema(
    name="clock",
    description=(
        "The current date and time in UTC (RFC 3339). You are never told the time otherwise: "
        "call this whenever the date or time matters."
    ),
    parameters={"type": "object", "properties": {}, "required": []},
)
FIND_TOOL = ToolSchema(
    name="find_tool",
    description=(
        "Find a tool beyond the core ones: searches the names and descriptions "
        "of every tool you can use for a word. Returns the matching tools' schemas; then run "
        "one with call_tool."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "One word to look for, such as 'echo' or 'weather'.",
            }
        },
        "required": ["query"],
    },
)
CALL_TOOL = ToolSchema(
    name="call_tool",
    description=(
        "Run a tool that find_tool found, by its name, with the arguments its schema asks for."
    ),
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The tool's name, as find_tool gave it."},
            "arguments": {
                "type": "object",
                "description": "The tool's arguments, an object as its schema describes.",
            },
        },
        "required": ["name", "arguments"],
    },
)
READ_RESULT = ToolSchema(
    name="read_result",
    description="Read a part of an earlier tool result that was cut: never run its call again.",
    parameters={
        "type": "object",
        "properties": {
            "call": {"type": "integer", "minimum": 1, "description": "Its call number."},
            "offset": {"type": "integer", "minimum": 0, "description": "First character."},
            "limit": {"type": "integer", "minimum": 1, "description": "Most characters."},
        },
        "required": ["call"],
    },
)
CORE_TOOLS = (CLOCK, FIND_TOOL, CALL_TOOL, READ_RESULT)
ECHO = ToolSchema(
    name="echo",
    description="Returns its text argument unchanged. Useful to test calling tools.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to return."}},
        "required": ["text"],
    },
)
