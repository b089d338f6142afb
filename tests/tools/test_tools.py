"""Tools: dispatch, find_tool, call_tool, the result cap, the port's answers, FakeTools."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.testing import FakeTools
from boxmaker.tools import (
    CLOCK,
    CORE_TOOLS,
    ECHO,
    FIND_TOOL,
    READ_FILE,
    Port,
    answer_of,
    cap_result,
    definition_hash,
    dispatch,
    failed,
    local,
)
from boxmaker.tools.results import ReadBack, marker

TOOLS = (*CORE_TOOLS, READ_FILE)  # a session's baseline: the core four and a configured one


def test_find_tool_goes_to_the_port_with_the_sessions_definition() -> None:
    found = dispatch(TOOLS, "find_tool", '{"query": "echo"}')
    assert found == Port("find_tool", '{"query":"echo"}', definition_hash(FIND_TOOL))


def test_a_baseline_tool_goes_to_the_port_with_its_definition_hash() -> None:
    assert dispatch(TOOLS, "clock", "{}") == Port("clock", "{}", definition_hash(CLOCK))
    assert dispatch(TOOLS, "clock", "") == Port("clock", "{}", definition_hash(CLOCK))
    assert dispatch(TOOLS, "read_file", '{"path": "a.md"}') == Port(
        "read_file", '{"path":"a.md"}', definition_hash(READ_FILE)
    )


def test_the_hash_is_of_the_schema_the_session_has() -> None:
    changed = p.ToolSchema(CLOCK.name, "Another description.", CLOCK.parameters)
    assert definition_hash(changed) != definition_hash(CLOCK)
    decision = dispatch((changed, *CORE_TOOLS[1:]), "clock", "{}")
    assert decision == Port("clock", "{}", definition_hash(changed))


def test_call_tool_sends_its_target_with_the_inner_arguments_and_no_definition() -> None:
    arguments = json.dumps({"name": "echo", "arguments": {"text": "hi ✓"}})
    assert dispatch(TOOLS, "call_tool", arguments) == Port("echo", '{"text":"hi ✓"}')
    # brokerd says whether a target exists: loopd knows only its own baseline
    assert dispatch(TOOLS, "call_tool", json.dumps({"name": "weather", "arguments": {}})) == (
        Port("weather", "{}")
    )


def test_call_tool_of_a_baseline_tool_keeps_the_sessions_definition() -> None:
    decision = dispatch(TOOLS, "call_tool", json.dumps({"name": "clock", "arguments": {}}))
    assert decision == Port("clock", "{}", definition_hash(CLOCK))


@pytest.mark.parametrize("name", ["call_tool", "read_result"])
def test_call_tool_of_loopds_own_tools_is_answered_here(name: str) -> None:
    decision = dispatch(TOOLS, "call_tool", json.dumps({"name": name, "arguments": {}}))
    assert decision == failed(f"Call {name} directly, not through call_tool.")


def test_read_result_is_answered_by_loopd() -> None:
    assert dispatch(TOOLS, "read_result", '{"call": 3, "offset": 10}') == ReadBack(3, 10, None)


def test_a_tool_outside_the_baseline_is_answered_with_what_to_do() -> None:
    for name in ("echo", "weather"):
        assert dispatch(TOOLS, name, "{}") == failed(
            f"Unknown tool {name!r}. Use find_tool to find one, then call_tool to run it."
        )


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("find_tool", "{query: echo}", "The arguments of find_tool are not valid JSON"),
        ("find_tool", "[1]", "must be a JSON object, not list"),
        ("find_tool", "{}", "The arguments of find_tool miss the required field 'query'"),
        ("call_tool", '{"name": "echo"}', "miss the required field 'arguments'"),
        ("read_file", '{"path": 5}', "$.path: expected string, got integer"),
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
    decision = dispatch(TOOLS, name, arguments)
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
        (p.PendingApprovalResponse("a-1", "write_file x"), "needs the owner's approval"),
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


async def test_fake_tools_find_echo_and_ask_for_the_tools_named() -> None:
    tools = FakeTools(TickingClock(), ask=("echo",))
    session = p.SessionId("s")
    found = await tools.call(p.ToolRequest(session, 1, "find_tool", '{"query": "echo"}'))
    assert isinstance(found, p.ResultResponse)
    assert json.loads(found.content.rsplit("\n", 1)[0]) == [p.unstructure(ECHO)]
    asked = await tools.call(p.ToolRequest(session, 2, "echo", '{"text":"hi"}'))
    assert asked == p.PendingApprovalResponse("a-2", 'echo {"text":"hi"}', "text: hi")
    assert await tools.approve(session, "a-2", p.Answer.DENY) == p.DeniedResponse(
        "the owner said no"
    )
    assert isinstance(await tools.call(p.ToolRequest(session, 3, "echo", '{"text":"hi"}')),
                      p.PendingApprovalResponse)  # fmt: skip
    ran = await tools.approve(session, "a-3", p.Answer.SESSION)
    assert ran == p.ResultResponse("hi", p.DataClass.PUBLIC, False, False)
    assert await tools.call(p.ToolRequest(session, 4, "echo", '{"text":"x"}')) == (
        p.ResultResponse("x", p.DataClass.PUBLIC, False, False)
    )
