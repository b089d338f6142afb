"""A call's arguments are checked against its tool's JSON Schema before anything runs, and the
model is told where they do not fit and what was expected."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker import proto as p
from boxmaker.tools import CORE_TOOLS, ECHO, READ_FILE, dispatch
from boxmaker.tools.arguments import check_arguments

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
        p.DataClass.PUBLIC, untrusted=False, truncated=False,
    )  # fmt: skip
