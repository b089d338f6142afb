"""Who answers a tool call, and what the model is told (SPEC section 6). Pure.

The model sees four core tools, fixed for the epoch: `clock` (answered by the port),
`find_tool` (answered here: a search of the registry), `call_tool` (checked here, then
answered by the port) and `read_result` (checked here, then answered by the loop from the
session's kept results). Anything else is answered here with a sentence the model can act on.
Every answer is a `ResultResponse`: a tool failure is always data for the model, never a crash
of the turn.
"""

from __future__ import annotations

from collections.abc import Collection
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
    encode,
    parse_json,
    unstructure,
)
from .arguments import check_arguments
from .registry import Registry
from .results import ReadBack
from .schemas import CALL_TOOL, FIND_TOOL, READ_RESULT

__all__ = ["SAID_BY_DISPATCH", "Port", "answer_of", "dispatch", "local"]

# The opening words of what loopd answers for a call it does not run, or of a port's failure
# (what follows them varies): a fenced session's answers are shown without them.
SAID_BY_DISPATCH = (
    "No tool matches.",
    "Unknown tool ",
    "The tool failed: ",
    "The call was denied: ",
)


def local(text: str) -> ResultResponse:
    """A result loopd gives itself: public, trusted, whole."""
    return ResultResponse(text, DataClass.PUBLIC, untrusted=False, truncated=False)


@frozen
class Port:
    """The call goes to the port: `arguments` is JSON text."""

    tool: str
    arguments: str


def _object(arguments: str, tool: str) -> dict[str, Any] | str:
    try:
        value = parse_json(arguments or "{}")
    except DecodeError as exc:
        return f"The arguments of {tool} are not valid JSON ({exc}). Send a JSON object."
    if not isinstance(value, dict):
        return f"The arguments of {tool} must be a JSON object, not {type(value).__name__}."
    return value


def dispatch(
    registry: Registry, name: str, arguments: str, offered: Collection[str] = ()
) -> ResultResponse | Port | ReadBack:
    """Decide who answers a tool call: a result loopd gives itself, or the port; never raises.

    A registry tool is called by its name when it is core, or `offered` (a session given
    every tool of the registry by name); the others only through `call_tool`."""
    args = _object(arguments, name)
    if isinstance(args, str):
        return local(args)
    if name == FIND_TOOL.name:
        if (problem := check_arguments(FIND_TOOL, args)) is not None:
            return local(problem)
        found = registry.find(str(args["query"]))
        if not found:
            return local("No tool matches.")
        schemas = encode([unstructure(schema) for schema in found]).decode()
        return local(f"{schemas}\nCall it with call_tool.")
    if name == READ_RESULT.name:
        if (problem := check_arguments(READ_RESULT, args)) is not None:
            return local(problem)
        return ReadBack.of(args)
    if name == CALL_TOOL.name:
        if (problem := check_arguments(CALL_TOOL, args)) is not None:
            return local(problem)
        target, inner = args["name"], args["arguments"]  # a string and an object: checked
        entry = registry.get(target)
        if entry is None or entry.core:
            return local(f"Unknown tool {target!r} for call_tool. Use find_tool to find one.")
        if (problem := check_arguments(entry.schema, inner)) is not None:
            return local(problem)
        return Port(entry.schema.name, encode(inner).decode())
    entry = registry.get(name)
    if entry is not None and (entry.core or name in offered):
        if (problem := check_arguments(entry.schema, args)) is not None:
            return local(problem)
        return Port(name, encode(args).decode())
    hint = " Use call_tool to call it." if entry is not None else " Use find_tool to find one."
    return local(f"Unknown tool {name!r}.{hint}")


def answer_of(response: ToolResponse) -> ResultResponse:
    """A port's answer as the result the model gets: `failed`, `denied` and
    `pending_approval` become a sentence saying so."""
    match response:
        case ResultResponse():
            return response
        case FailedResponse(message=message):
            return local(f"The tool failed: {message}")
        case DeniedResponse(reason=reason):
            return local(f"The call was denied: {reason}")
        case PendingApprovalResponse():
            return local(
                "This call needs the owner's approval, and this version of Boxmaker cannot wait "
                "for it; it was not run. Tell the owner what you wanted to do."
            )
    raise TypeError(f"not a tool response: {response!r}")
