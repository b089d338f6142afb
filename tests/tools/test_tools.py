"""Tools: dispatch, find_tool, call_tool, the result cap, the port's answers, FakeTools."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.tools import (
    ECHO,
    FakeTools,
    Port,
    answer_of,
    cap_result,
    default_registry,
    dispatch,
    local,
)
from boxmaker.tools.results import marker

REGISTRY = default_registry()


def test_find_tool_matches_names_and_descriptions_ignoring_case() -> None:
    for query in ("echo", "ECHO", "unchanged", "Test calling"):
        found = dispatch(REGISTRY, "find_tool", json.dumps({"query": query}))
        assert isinstance(found, p.ResultResponse)
        schemas_text, tail = found.content.rsplit("\n", 1)
        assert tail == "Call it with call_tool."
        assert json.loads(schemas_text) == [p.unstructure(ECHO)]


def test_find_tool_without_a_match() -> None:
    assert dispatch(REGISTRY, "find_tool", '{"query": "weather"}') == local("No tool matches.")


def test_find_tool_does_not_offer_core_tools() -> None:
    # clock is already in the model's tools; offering it for call_tool would be a dead end
    assert dispatch(REGISTRY, "find_tool", '{"query": "time"}') == local("No tool matches.")


def test_call_tool_sends_a_registered_tool_to_the_port_with_its_inner_arguments() -> None:
    arguments = json.dumps({"name": "echo", "arguments": {"text": "hi ✓"}})
    assert dispatch(REGISTRY, "call_tool", arguments) == Port("echo", '{"text":"hi ✓"}')


@pytest.mark.parametrize("name", ["weather", "clock", "find_tool", "call_tool"])
def test_call_tool_of_an_unknown_or_core_tool_is_answered_here(name: str) -> None:
    decision = dispatch(REGISTRY, "call_tool", json.dumps({"name": name, "arguments": {}}))
    assert decision == local(f"Unknown tool {name!r} for call_tool. Use find_tool to find one.")


def test_clock_goes_to_the_port() -> None:
    assert dispatch(REGISTRY, "clock", "{}") == Port("clock", "{}")
    assert dispatch(REGISTRY, "clock", "") == Port("clock", "{}")


def test_a_tool_called_directly_by_name_is_answered_with_what_to_do() -> None:
    assert dispatch(REGISTRY, "echo", '{"text": "x"}') == local(
        "Unknown tool 'echo'. Use call_tool to call it."
    )
    assert dispatch(REGISTRY, "weather", "{}") == local(
        "Unknown tool 'weather'. Use find_tool to find one."
    )


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("find_tool", "{query: echo}", "The arguments of find_tool are not valid JSON"),
        ("find_tool", "[1]", "must be a JSON object, not list"),
        ("find_tool", "{}", "The arguments of find_tool miss the required field 'query'"),
        ("call_tool", '{"name": "echo"}', "miss the required field 'arguments'"),
        ("call_tool", '{"name": "echo", "arguments": {}}', "echo miss the required field 'text'"),
        (
            "call_tool",
            '{"name": "echo", "arguments": "x"}',
            "$.arguments: expected object, got string",
        ),
    ],
)
def test_bad_arguments_are_answered_with_what_is_wrong(
    name: str, arguments: str, says: str
) -> None:
    decision = dispatch(REGISTRY, name, arguments)
    assert isinstance(decision, p.ResultResponse)
    assert says in decision.content


def capped(text: str, cap: int, call: int | None = None) -> tuple[str, bool]:
    result, cut = cap_result(local(text), cap, call)
    assert cut == (len(text.encode()) > cap)
    return result.content, result.truncated


def test_the_cap_keeps_the_head_and_the_tail_each_cut_at_a_character_boundary() -> None:
    assert capped("short", 64) == ("short", False)
    assert capped("x" * 64, 64) == ("x" * 64, False)
    # 80 bytes at 65: 32 bytes of head (16 é), 33 of tail (a cut é dropped: 16 é), 16 left out
    assert capped("é" * 40, 65) == ("é" * 16 + marker(16, None, 16) + "é" * 16, True)
    assert capped("a😀b", 4) == ("a" + marker(4, None, 1) + "b", True)
    assert capped("head" + "x" * 100 + "tail", 8, call=7) == (
        'head\n[... 100 bytes left out; read_result {"call": 7, "offset": 4} reads it ...]\ntail',
        True,
    )


def test_the_cap_keeps_the_class_and_a_cut_the_port_made() -> None:
    secret = p.ResultResponse("s" * 100, p.DataClass.SECRET, untrusted=True, truncated=False)
    assert cap_result(secret, 10) == (
        p.ResultResponse(
            "s" * 5 + marker(90, None, 5) + "s" * 5, p.DataClass.SECRET, True, truncated=True
        ),
        True,
    )
    cut_by_port = p.ResultResponse("short", p.DataClass.PUBLIC, False, truncated=True)
    assert cap_result(cut_by_port, 64) == (cut_by_port, False)


@given(st.text(), st.integers(1, 40), st.integers(1, 999))
def test_the_cap_keeps_a_whole_head_and_tail_within_the_cap(text: str, cap: int, call: int) -> None:
    content, truncated = capped(text, cap, call)
    if not truncated:
        assert content == text
        assert len(text.encode()) <= cap
        return
    head, rest = content.split("\n[... ", 1)
    left_out, tail = rest.split(" ...]\n", 1)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head.encode()) + len(tail.encode()) <= cap
    told = int(left_out.split(" bytes")[0].replace(",", ""))
    assert told == len(text.encode()) - len(head.encode()) - len(tail.encode())
    assert f'"offset": {len(head)}}}' in left_out  # where read_result takes it up


@pytest.mark.parametrize(
    ("response", "text"),
    [
        (p.ResultResponse("ok", p.DataClass.PRIVATE, True, True), "ok"),
        (p.FailedResponse("disk on fire"), "The tool failed: disk on fire"),
        (p.DeniedResponse("not granted"), "The call was denied: not granted"),
        (p.PendingApprovalResponse(), "cannot wait for it"),
    ],
)
def test_port_answers_become_result_text(response: p.ToolResponse, text: str) -> None:
    answer = answer_of(response)
    assert text in answer.content
    flags = (answer.data_class, answer.untrusted, answer.truncated)
    if isinstance(response, p.ResultResponse):
        assert flags == (p.DataClass.PRIVATE, True, True)
    else:
        assert flags == (p.DataClass.PUBLIC, False, False)


async def test_fake_tools_answer_clock_and_echo() -> None:
    clock = TickingClock()
    tools = FakeTools(clock)
    session = p.SessionId("s")
    now = await tools.call(p.ToolRequest(session, 1, "clock", "{}"))
    assert now == p.ResultResponse("2026-11-29T21:31:34.123456Z", p.DataClass.PUBLIC, False, False)
    echoed = await tools.call(p.ToolRequest(session, 2, "echo", '{"text":"hi"}'))
    assert echoed == p.ResultResponse("hi", p.DataClass.PUBLIC, False, False)
    assert isinstance(await tools.call(p.ToolRequest(session, 3, "rm", "{}")), p.FailedResponse)
    assert [r.call for r in tools.requests] == [1, 2, 3]
