"""A tool call in one short line (`tools.call_summary`), for `tool_call_started`."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.tools import SUMMARY_CHARS, call_summary


def test_the_argument_that_says_most() -> None:
    assert call_summary(json.dumps({"path": "notes/todo.md", "content": "x"})) == "notes/todo.md"
    assert call_summary(json.dumps({"command": "ls -la\n  /tmp"})) == "ls -la /tmp"
    assert call_summary(json.dumps({"query": "bread", "limit": 5})) == "bread"
    assert call_summary(json.dumps({"limit": 5, "deep": [1]})) == '{"limit":5,"deep":[1]}'


def test_nothing_for_no_arguments_or_no_object() -> None:
    assert call_summary("{}") == ""
    assert call_summary("") == ""
    assert call_summary("not json") == ""
    assert call_summary("[1, 2]") == ""
    assert call_summary("[" * 5000) == ""  # nesting past the reader's bound: nothing, no error


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=300) | st.integers(), max_size=5))
def test_always_one_short_line(arguments: dict[str, object]) -> None:
    line = call_summary(json.dumps(arguments))
    assert len(line) <= SUMMARY_CHARS
    assert "\n" not in line
