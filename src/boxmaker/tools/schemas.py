"""The tools' schemas as the model sees them: the four core tools every baseline made now
holds (fixed for the session; sessions made before `read_result` keep their three), and the
tools brokerd runs (`echo`, the file tools, `shell`, `run_cell`, and memory's `remember`,
`forget` and `recall`), any of which the config may make core too.
`definition_hash` is what a session's baseline and brokerd compare: the SHA-256 of a schema's
compact JSON. Pure.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..proto import ToolSchema, encode, unstructure

__all__ = [
    "BUILTIN_TOOLS",
    "CALL_TOOL",
    "CANCEL_SCHEDULE",
    "CLOCK",
    "CORE_TOOLS",
    "ECHO",
    "EDIT_FILE",
    "FILE_TOOLS",
    "FIND_TOOL",
    "FORGET",
    "LIST_DIR",
    "LIST_SCHEDULES",
    "LOOPD_TOOLS",
    "MEMORY_TOOLS",
    "READ_FILE",
    "READ_RESULT",
    "RECALL",
    "REMEMBER",
    "RUN_CELL",
    "SANDBOXED_TOOLS",
    "SCHEDULE",
    "SCHEDULE_TOOLS",
    "SEARCH_FILES",
    "SHELL",
    "WRITE_FILE",
    "definition_hash",
    "session_tools",
]


def definition_hash(schema: ToolSchema) -> str:
    """The SHA-256 (hex) of `schema`'s compact JSON: its name, description and parameters."""
    return hashlib.sha256(encode(unstructure(schema))).hexdigest()


def _object(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


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
LOOPD_TOOLS = (CALL_TOOL.name, READ_RESULT.name)  # answered by loopd, never sent to brokerd
ECHO = ToolSchema(
    name="echo",
    description="Returns its text argument unchanged. Useful to test calling tools.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to return."}},
        "required": ["text"],
    },
)

_PATH = {"type": "string", "description": "A path in the workspace, such as 'notes/todo.md'."}
READ_FILE = ToolSchema(
    name="read_file",
    description="Read a text file of the workspace, its lines numbered.",
    parameters=_object(
        ["path"],
        path=_PATH,
        offset={"type": "integer", "minimum": 1, "description": "The first line (from 1)."},
        limit={"type": "integer", "minimum": 1, "description": "How many lines."},
    ),
)
LIST_DIR = ToolSchema(
    name="list_dir",
    description="List a folder of the workspace: names, kinds and sizes. '.' is the workspace.",
    parameters=_object(["path"], path=_PATH),
)
SEARCH_FILES = ToolSchema(
    name="search_files",
    description="Search the workspace's text files for a regular expression: file:line: text.",
    parameters=_object(
        ["pattern"],
        pattern={"type": "string", "description": "A regular expression."},
        path={"type": "string", "description": "A folder or file to search (default: all)."},
    ),
)
WRITE_FILE = ToolSchema(
    name="write_file",
    description="Create a file of the workspace, or replace its whole content.",
    parameters=_object(
        ["path", "content"], path=_PATH, content={"type": "string", "description": "The text."}
    ),
)
EDIT_FILE = ToolSchema(
    name="edit_file",
    description="Replace exact text in a file of the workspace: old must be found once.",
    parameters=_object(
        ["path", "old", "new"],
        path=_PATH,
        old={"type": "string", "description": "The exact text to replace."},
        new={"type": "string", "description": "The text to put instead."},
        replace_all={"type": "boolean", "description": "Replace every occurrence of old."},
    ),
)
FILE_TOOLS = (READ_FILE, LIST_DIR, SEARCH_FILES, WRITE_FILE, EDIT_FILE)
SHELL = ToolSchema(
    name="shell",
    description=(
        "Run a bash command in a sandbox whose working folder is the workspace; no network. "
        "Returns its output and exit code."
    ),
    parameters=_object(
        ["command"],
        command={"type": "string", "description": "The command, such as 'ls -la'."},
        timeout_s={"type": "integer", "minimum": 1, "description": "Seconds it may take."},
    ),
)
RUN_CELL = ToolSchema(
    name="run_cell",
    description=(
        "Run Python code in your own interpreter (a sandbox; no network): variables stay from "
        "one cell to the next. Returns what it printed and its last expression's value."
    ),
    parameters=_object(["code"], code={"type": "string", "description": "Python code."}),
)
SANDBOXED_TOOLS = (SHELL, RUN_CELL)  # run in bubblewrap (brokerd/sandbox/bwrap.py)
REMEMBER = ToolSchema(
    name="remember",
    description=(
        "Keep a note for later conversations: a fact, a preference, a decision, in a sentence "
        "or two. pin: true puts it in every new conversation's instructions; unpinned notes "
        "are found with recall. Returns its id."
    ),
    parameters=_object(
        ["text"],
        text={"type": "string", "description": "The note, on its own (it is read later)."},
        pin={"type": "boolean", "description": "Keep it in view in new conversations."},
    ),
)
FORGET = ToolSchema(
    name="forget",
    description="Withdraw a note by its id (such as n12): it is no longer recalled or pinned.",
    parameters=_object(["id"], id={"type": "string", "description": "The note's id."}),
)
RECALL = ToolSchema(
    name="recall",
    description=(
        "Search your notes and every earlier conversation for words: returns the passages "
        "found, each with where and when it was said."
    ),
    parameters=_object(
        ["query"],
        query={"type": "string", "description": "Words to look for, such as 'dentist'."},
        limit={"type": "integer", "minimum": 1, "maximum": 20, "description": "Most passages."},
    ),
)
MEMORY_TOOLS = (REMEMBER, FORGET, RECALL)  # answered by brokerd from <home>/memory
SCHEDULE = ToolSchema(
    name="schedule",
    description=(
        "Have a message sent to you in this conversation later, once or again and again: "
        "a reminder, a check, a daily task. The owner is asked first. Returns its id."
    ),
    parameters=_object(
        ["when", "message"],
        when={
            "type": "string",
            "description": (
                "When: 'in 20m', 'at 2026-12-07T09:00' (the owner's zone), 'every 2h', or a "
                "cron line such as '0 7 * * *' (every day at 7:00)."
            ),
        },
        message={
            "type": "string",
            "description": "What you will be told then, such as 'check whether the build passed'.",
        },
    ),
)
LIST_SCHEDULES = ToolSchema(
    name="list_schedules",
    description="List this conversation's schedules: id, when, next time, message.",
    parameters=_object([]),
)
CANCEL_SCHEDULE = ToolSchema(
    name="cancel_schedule",
    description="Cancel one of this conversation's schedules by its id (such as s3).",
    parameters=_object(["id"], id={"type": "string", "description": "The schedule's id."}),
)
SCHEDULE_TOOLS = (SCHEDULE, LIST_SCHEDULES, CANCEL_SCHEDULE)  # brokerd, <home>/schedules.jsonl
BUILTIN_TOOLS = (  # brokerd's own
    CLOCK,
    ECHO,
    *FILE_TOOLS,
    *SANDBOXED_TOOLS,
    *MEMORY_TOOLS,
    *SCHEDULE_TOOLS,
)


def session_tools(core: tuple[str, ...], every: bool = False) -> tuple[ToolSchema, ...]:
    """A new session's tools: the four core ones and those the config names in `core`; or,
    for a profile given its tools by name (`every`), `clock`, `echo` and those of `core`
    (`find_tool`, `call_tool` and `read_result` among them only when named there)."""
    if every:
        named = [
            tool
            for name in core
            for tool in (*CORE_TOOLS, *BUILTIN_TOOLS)
            if tool.name == name and tool not in (CLOCK, ECHO)
        ]
        return (CLOCK, ECHO, *named)
    named = [tool for name in core for tool in BUILTIN_TOOLS if tool.name == name]
    return (*CORE_TOOLS, *named)
