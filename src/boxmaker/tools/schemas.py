"""The tools' schemas as the model sees them: the three core tools every baseline holds
(fixed for the epoch), and `echo`, the one tool behind `find_tool` in this milestone. Pure.
"""

from __future__ import annotations

from ..proto import ToolSchema

__all__ = ["CALL_TOOL", "CLOCK", "CORE_TOOLS", "ECHO", "FIND_TOOL"]

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
        "Find a tool beyond clock, find_tool and call_tool: searches the names and descriptions "
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
CORE_TOOLS = (CLOCK, FIND_TOOL, CALL_TOOL)
ECHO = ToolSchema(
    name="echo",
    description="Returns its text argument unchanged. Useful to test calling tools.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to return."}},
        "required": ["text"],
    },
)
