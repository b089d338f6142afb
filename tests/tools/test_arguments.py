"""A call's arguments are checked against its tool's JSON Schema before anything runs, and the
model is told where they do not fit and what was expected."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker import proto as p
from boxmaker.tools import CORE_TOOLS, ECHO, READ_FILE, dispatch
from boxmaker.tools.arguments import check_arguments, schema_problem

WHERE = p.ToolSchema(
    name="weather",
    description="The weather somewhere.",
    parameters={
        "type": "object",
        "properties": {
            "where": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "units": {"enum": ["metric", "imperial"]},
            "days": {"type": "integer", "minimum": 1},
            "note": {"type": ["string", "null"]},
        },
        "required": ["where"],
        "additionalProperties": False,
    },
)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"where": {"city": 5}}, "$.where.city: expected string, got integer"),
        ({"where": {}}, "$.where: 'city' is a required property"),
        ({"where": {"city": "Oslo"}, "units": "kelvin"}, '$.units: expected one of "metric", '
                                                         '"imperial"'),
        ({"where": {"city": "Oslo"}, "days": True}, "$.days: expected integer, got boolean"),
        ({"where": {"city": "Oslo"}, "days": 0}, "$.days: 0 is less than the minimum of 1"),
        ({"where": {"city": "Oslo"}, "note": 1.5}, "$.note: expected string or null, got number"),
        ({"where": {"city": "Oslo"}, "when": "now"}, "$: Additional properties are not allowed"),
        ({"where": []}, "$.where: expected object, got array"),
    ],
)  # fmt: skip
def test_arguments_that_do_not_fit_are_told_where_and_what_was_expected(
    arguments: dict[str, Any], says: str
) -> None:
    said = check_arguments(WHERE, arguments)
    assert said is not None
    assert said.startswith("The arguments of weather do not fit its schema: ")
    assert says in said


def test_arguments_that_fit_pass() -> None:
    assert check_arguments(WHERE, {"where": {"city": "Oslo"}, "days": 3, "note": None}) is None
    assert check_arguments(ECHO, {"text": "x"}) is None


def test_a_missing_field_at_the_top_says_which_fields_the_tool_takes() -> None:
    assert check_arguments(ECHO, {}) == (
        "The arguments of echo miss the required field 'text'. Call it again with 'text'."
    )


def test_a_call_whose_arguments_do_not_fit_never_reaches_the_port() -> None:
    decision = dispatch((*CORE_TOOLS, READ_FILE), "read_file", '{"path": 5}')
    assert decision == p.ResultResponse(
        "The arguments of read_file do not fit its schema: $.path: expected string, got integer.",
        p.DataClass.PUBLIC, untrusted=False, truncated=False, is_error=True,
    )  # fmt: skip


def test_a_pattern_that_backtracks_without_end_is_bounded_and_said() -> None:
    # An MCP server's schema is hostile: `re` would take hours on this; `regex` stops it.
    schema = p.ToolSchema("srv.t", "d", {"type": "object", "properties": {
        "a": {"type": "string", "pattern": "^(a|a)*$"}}})  # fmt: skip
    said = check_arguments(schema, {"a": "a" * 24 + "!"})  # `re`: a second; longer, hours
    assert said == ("The arguments of srv.t could not be checked: a pattern of its schema took "
                    "more than 0.1 s to match.")  # fmt: skip
    keys = p.ToolSchema("srv.k", "d", {"type": "object", "patternProperties": {
        "^(a|a)*$": {"type": "string"}}})  # fmt: skip
    assert "took more than 0.1 s" in (check_arguments(keys, {"a" * 24 + "!": 1}) or "")


def test_a_broken_schema_is_said_never_raised() -> None:
    for parameters in ({"type": "object", "required": 5}, {"type": "object", "properties": []},
                       {"type": "object", "properties": {"a": {"pattern": "("}}}):  # fmt: skip
        said = check_arguments(p.ToolSchema("srv.t", "d", parameters), {"a": "x"})
        assert said is not None
        assert said.startswith("The arguments of srv.t could not be checked: its schema is broken")
    assert schema_problem({"type": "object", "required": 5}) is not None
    assert schema_problem({"type": "object", "properties": {"q": {"type": "string"}}}) is None


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize(
    ("parameters", "arguments", "says"),
    [
        ({"type": "object", "$ref": "#/nowhere"}, {}, "its schema is broken"),
        ({"type": "object", "$ref": "http://example.invalid/s"}, {}, "its schema is broken"),
        ({"type": "object", "$dynamicRef": "#x"}, {}, "its schema is broken"),
        ({"type": "object", "$ref": "#"}, {}, "its schema never ends"),
        ({"type": "object", "properties": {"n": {"multipleOf": 0.1}}}, {"n": 10**400},
         "its schema is broken"),
    ],
)  # fmt: skip
def test_a_hostile_schema_or_argument_is_refused_in_words_never_raised(
    parameters: dict[str, Any], arguments: dict[str, Any], says: str
) -> None:
    # Found by attack (issue 49's review): each of these raised out of `check_arguments`, into
    # brokerd's call and loopd's `dispatch`, at every call of the tool.
    said = check_arguments(p.ToolSchema("srv.t", "d", parameters), arguments)
    assert said is not None
    assert said.startswith(f"The arguments of srv.t could not be checked: {says}")


def test_a_schema_nested_past_the_stack_is_said_to_be_so() -> None:
    assert schema_problem(deep(3000)) == "an input schema nested too deep to check"
