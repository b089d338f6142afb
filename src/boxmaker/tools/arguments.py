"""A call's arguments checked against its tool's JSON Schema before anything runs, and what
the model is told when they do not fit: where, and what was expected (`$.text: expected
string, got integer`), in words a small model can correct itself by. Pure.

The schemas are the registry's (JSON Schema, draft 2020-12, as the tools' `parameters`);
`jsonschema` checks them, one compiled validator per schema kept. A required field that is
missing at the top is said the way the model can act on at once: which field, and which
fields the tool takes.
"""

from __future__ import annotations

import functools
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from ..proto import ToolSchema, encode, parse_json

__all__ = ["check_arguments"]

_MOST = 200  # characters of a value or a validator's own message quoted back


def check_arguments(schema: ToolSchema, arguments: dict[str, Any]) -> str | None:
    """What is wrong with `arguments` for `schema`'s tool, as the sentence the model gets; None
    when they fit."""
    required = schema.parameters.get("required", [])
    absent = [name for name in required if name not in arguments]
    if absent:
        return (
            f"The arguments of {schema.name} miss the required field "
            f"{', '.join(repr(a) for a in absent)}. Call it again with "
            f"{', '.join(repr(a) for a in required)}."
        )
    validator = _validator(encode(schema.parameters).decode())
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    return f"The arguments of {schema.name} do not fit its schema: {_said(error)}."


@functools.lru_cache(maxsize=256)
def _validator(parameters: str) -> Draft202012Validator:
    return Draft202012Validator(parse_json(parameters))


def _said(error: ValidationError) -> str:
    path, wanted = error.json_path, error.validator_value
    if error.validator == "type":
        expected = " or ".join(wanted) if isinstance(wanted, list) else str(wanted)
        return f"{path}: expected {expected}, got {_json_type(error.instance)}"
    if error.validator == "enum" and isinstance(wanted, list):
        choices = ", ".join(encode(v).decode() for v in wanted)
        return f"{path}: expected one of {choices[:_MOST]}"
    return f"{path}: {error.message[:_MOST]}"


def _json_type(value: Any) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "boolean"
        case int():
            return "integer"
        case float():
            return "number"
        case str():
            return "string"
        case list():
            return "array"
        case dict():
            return "object"
    return type(value).__name__
