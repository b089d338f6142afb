"""Who answers a tool call, and what the model is told (SPEC sections 6 and 14). Pure.

A session's baseline holds its tools, fixed for its life: `clock`, `find_tool`, `call_tool`,
`read_result`, and the tools the config made core when it was created. loopd answers
`read_result` itself (from the session's kept results) and unwraps `call_tool` into a call of
its target; every other tool of the baseline goes to the port (brokerd) with the hash of the
definition the session has, so brokerd runs it only with the semantics the session was given.
A call's arguments are checked here against the session's schema (and again by brokerd,
which trusts nothing); anything else is answered here with a sentence the model can act on.
Every answer is a `ResultResponse`: a tool failure is always data for the model, never a
crash of the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from ..proto import (
    DataClass,
    DecodeError,
    DeniedResponse,
    FailedResponse,
    PendingApprovalResponse,
    ResultResponse,
    ToolResponse,
    ToolSchema,
    encode,
    parse_json,
)
from .arguments import check_arguments
from .results import ReadBack
from .schemas import CALL_TOOL, LOOPD_TOOLS, READ_RESULT, definition_hash

__all__ = ["SAID_BY_DISPATCH", "Port", "answer_of", "dispatch", "failed", "local"]

# The opening words of what loopd answers for a call it does not run, or of a port's failure
# (what follows them varies): a fenced session's answers are shown without them.
SAID_BY_DISPATCH = (
    "No tool matches.",
    "Unknown tool ",
    "The tool failed: ",
    "The call was denied: ",
)


def local(text: str) -> ResultResponse:
    """A result a daemon gives itself (not a tool's words): public, trusted, whole."""
    return ResultResponse(text, DataClass.PUBLIC, untrusted=False, truncated=False)


def failed(text: str) -> ResultResponse:
    """A result a daemon gives itself saying the call did not run as asked (a failure, a
    denial, a timeout, arguments its schema refuses): `local`, with `is_error`."""
    return ResultResponse(text, DataClass.PUBLIC, untrusted=False, truncated=False, is_error=True)


@frozen
class Port:
    """The call goes to the port: `arguments` is JSON text; `definition` the hash of the
    session's schema of the tool (None for a tool reached through `call_tool`)."""

    tool: str
    arguments: str
    definition: str | None = None


def _object(arguments: str, tool: str) -> dict[str, Any] | str:
    try:
        value = parse_json(arguments or "{}")
    except DecodeError as exc:
        return f"The arguments of {tool} are not valid JSON ({exc}). Send a JSON object."
    if not isinstance(value, dict):
        return f"The arguments of {tool} must be a JSON object, not {type(value).__name__}."
    return value


def dispatch(
    tools: Sequence[ToolSchema], name: str, arguments: str
) -> ResultResponse | Port | ReadBack:
    """Decide who answers a call of `name` in a session whose baseline holds `tools`: a
    result loopd gives itself, a part of a kept result, or the port; never raises."""
    schema = next((tool for tool in tools if tool.name == name), None)
    if schema is None:
        hint = "Use find_tool to find one, then call_tool to run it."
        return failed(f"Unknown tool {name!r}. {hint}")
    args = _object(arguments, name)
    if isinstance(args, str):
        return failed(args)
    if (problem := check_arguments(schema, args)) is not None:
        return failed(problem)
    if name == READ_RESULT.name:
        return ReadBack.of(args)
    if name == CALL_TOOL.name:
        target, inner = args["name"], args["arguments"]  # a string and an object: checked
        if target in LOOPD_TOOLS:
            return failed(f"Call {target} directly, not through call_tool.")
        given = next((tool for tool in tools if tool.name == target), None)
        if given is not None:  # the session's own definition, as if called directly
            return Port(target, encode(inner).decode(), definition_hash(given))
        return Port(target, encode(inner).decode())
    return Port(name, encode(args).decode(), definition_hash(schema))


def answer_of(response: ToolResponse) -> ResultResponse:
    """A port's answer as the result the model gets: `failed` and `denied` become a sentence
    saying so (`pending_approval` is the turn's to wait on: here it says nobody answered)."""
    match response:
        case ResultResponse():
            return response
        case FailedResponse(message=message, untrusted=True):
            text = f"The tool failed: {message}"
            return ResultResponse(
                text, DataClass.PRIVATE, untrusted=True, truncated=False, is_error=True
            )
        case FailedResponse(message=message):
            return failed(f"The tool failed: {message}")
        case DeniedResponse(reason=reason):
            return failed(f"The call was denied: {reason}")
        case PendingApprovalResponse(summary=summary):
            return failed(
                f"The call was denied: {summary} needs the owner's approval, and no answer came; "
                "it was not run."
            )
    raise TypeError(f"not a tool response: {response!r}")
