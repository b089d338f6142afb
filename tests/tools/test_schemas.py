"""Which tools a new session's baseline holds (`session_tools`)."""

from __future__ import annotations

from boxmaker.tools import CALL_TOOL, CLOCK, CORE_TOOLS, ECHO, FIND_TOOL, READ_FILE, session_tools


def test_a_native_session_has_the_four_core_tools_and_those_named() -> None:
    assert session_tools(("read_file",)) == (*CORE_TOOLS, READ_FILE)
    assert session_tools(("find_tool", "read_file")) == (*CORE_TOOLS, READ_FILE)  # not twice


def test_a_session_of_named_tools_reaches_the_registry_only_when_asked() -> None:
    assert session_tools(("read_file",), every=True) == (CLOCK, ECHO, READ_FILE)
    named = session_tools(("find_tool", "call_tool", "echo"), every=True)
    assert named == (CLOCK, ECHO, FIND_TOOL, CALL_TOOL)  # MCP tools are found and called
