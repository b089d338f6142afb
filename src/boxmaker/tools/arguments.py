"""A call's arguments checked against its tool's JSON Schema before anything runs, and what
the model is told when they do not fit: where, and what was expected (`$.text: expected
string, got integer`), in words a small model can correct itself by. Pure.

The schemas are the registry's (JSON Schema, draft 2020-12, as the tools' `parameters`; an
MCP server's among them, so hostile): `jsonschema` checks them, one compiled validator per
schema kept, with `pattern` and `patternProperties` matched by `regex` within `PATTERN_S` (a
pattern that backtracks without end is an error, never a stuck brokerd), and a schema that
cannot be checked (`"required": 5`, a `$ref` to nowhere or to itself) said so rather than
raised: `check_arguments` never raises, and a call it refuses does not run. A required field
that is missing at the top is said the way the model can act on at once: which field, and
which fields the tool takes. `jsonschema` and `regex` are imported at the first check, so a process
that only imports the tools (bxctl, loopd) pays nothing for them: 30 ms at start, 3 MB held.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..proto import ToolSchema, encode, parse_json

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

__all__ = ["check_arguments", "schema_problem"]

_MOST = 200  # characters of a value or a validator's own message quoted back
PATTERN_S = 0.1  # seconds one `pattern` may take to match


def _search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches in `text`, within `PATTERN_S` (TimeoutError past it)."""
    import regex

    return regex.search(pattern, text, timeout=PATTERN_S) is not None


def _pattern(
    validator: Any, pattern: str, instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


@functools.cache
def _checker() -> Any:
    """The validator class: draft 2020-12, its patterns matched by `_search`."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
    )


def check_arguments(schema: ToolSchema, arguments: dict[str, Any]) -> str | None:
    """What is wrong with `arguments` for `schema`'s tool, as the sentence the model gets; None
    when they fit."""
    required = schema.parameters.get("required", [])
    required = [name for name in required if type(name) is str] if type(required) is list else []
    absent = [name for name in required if name not in arguments]
    if absent:
        return (
            f"The arguments of {schema.name} miss the required field "
            f"{', '.join(repr(a) for a in absent)}. Call it again with "
            f"{', '.join(repr(a) for a in required)}."
        )
    import regex
    from jsonschema.exceptions import best_match

    try:
        validator = _validator(encode(schema.parameters).decode())
        error = best_match(validator.iter_errors(arguments))
    except (TimeoutError, regex.error) as exc:
        return f"The arguments of {schema.name} could not be checked: {_what(exc)}."
    except RecursionError:  # a schema that refers to itself, or nests past the stack
        return f"The arguments of {schema.name} could not be checked: its schema never ends."
    except Exception as exc:  # a hostile schema: `$ref` to nowhere, numbers past a float, ...
        said = f"its schema is broken ({getattr(exc, 'message', exc)})"[:_MOST]
        return f"The arguments of {schema.name} could not be checked: {said}."
    if error is None:
        return None
    return f"The arguments of {schema.name} do not fit its schema: {_said(error)}."


def schema_problem(parameters: dict[str, Any]) -> str | None:
    """Why `parameters` is not a JSON Schema the arguments can be checked by, or None."""
    from jsonschema.exceptions import SchemaError

    try:
        _checker().check_schema(parameters)
    except SchemaError as exc:
        return f"an input schema that is not one ({exc.message[:_MOST]})"
    except RecursionError:
        return "an input schema nested too deep to check"
    return None


def _what(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        return f"a pattern of its schema took more than {PATTERN_S:g} s to match"
    return f"a pattern of its schema is not a regular expression ({exc})"[:_MOST]


@functools.lru_cache(maxsize=256)
def _validator(parameters: str) -> Any:
    """A checked schema's validator; SchemaError when it is not a schema."""
    schema = parse_json(parameters)
    _checker().check_schema(schema)
    return _checker()(schema)


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
