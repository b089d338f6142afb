"""Tools: the port that runs them, the registry that lists them, and `dispatch`, which decides
who answers a call (SPEC section 6).

The model sees three tools, fixed for the epoch: `clock` (answered by the port), `find_tool`
(answered here: a search of the registry) and `call_tool` (checked here, then answered by the
port). Anything else is answered here with a sentence the model can act on. A tool failure is
always data for the model, never a crash of the turn. `dispatch`, `cap_result` and
`response_text` are pure; `FakeTools` is this milestone's in-process port.
"""

from __future__ import annotations

from typing import Any, Protocol

from attrs import frozen

from ..clock import Clock
from ..proto import (
    DataClass,
    DecodeError,
    DeniedResponse,
    FailedResponse,
    PendingApprovalResponse,
    ResultResponse,
    ToolRequest,
    ToolResponse,
    ToolSchema,
    encode,
    parse_json,
    unstructure,
)
from ..session import CALL_TOOL, CLOCK, FIND_TOOL

__all__ = [
    "ECHO",
    "FakeTools",
    "Local",
    "Port",
    "Registry",
    "RegistryEntry",
    "ToolPort",
    "cap_result",
    "default_registry",
    "dispatch",
    "response_text",
]

ECHO = ToolSchema(
    name="echo",
    description="Returns its text argument unchanged. Useful to test calling tools.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to return."}},
        "required": ["text"],
    },
)
TRUNCATED = "[truncated]"


class ToolPort(Protocol):
    """Where tool calls are run (`brokerd` later; `FakeTools` now)."""

    async def call(self, request: ToolRequest) -> ToolResponse: ...


class FakeTools:
    """`clock` (the current time, RFC 3339) and `echo` (its `text`), in process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.requests: list[ToolRequest] = []

    async def call(self, request: ToolRequest) -> ToolResponse:
        self.requests.append(request)
        if request.tool == "clock":
            return ResultResponse(str(self._clock.now()), DataClass.PUBLIC, False, False)
        if request.tool == "echo":
            text = parse_json(request.arguments).get("text")
            return ResultResponse(str(text), DataClass.PUBLIC, False, False)
        return FailedResponse(f"FakeTools has no tool {request.tool!r}")


@frozen
class RegistryEntry:
    schema: ToolSchema
    core: bool


@frozen
class Registry:
    """Every tool a session may reach; core tools are in the baseline, the rest behind
    `find_tool` and `call_tool`."""

    entries: tuple[RegistryEntry, ...]

    def get(self, name: str) -> RegistryEntry | None:
        return next((e for e in self.entries if e.schema.name == name), None)

    def find(self, query: str) -> list[ToolSchema]:
        """Non-core tools whose name or description holds `query`, ignoring case."""
        wanted = query.casefold()
        return [
            e.schema
            for e in self.entries
            if not e.core
            and (wanted in e.schema.name.casefold() or wanted in e.schema.description.casefold())
        ]


def default_registry() -> Registry:
    return Registry((RegistryEntry(CLOCK, core=True), RegistryEntry(ECHO, core=False)))


@frozen
class Local:
    """The call is answered by loopd with this text."""

    text: str


@frozen
class Port:
    """The call goes to the port: `arguments` is JSON text."""

    tool: str
    arguments: str


def _missing(schema: ToolSchema, arguments: dict[str, Any]) -> str | None:
    required = schema.parameters.get("required", [])
    absent = [name for name in required if name not in arguments]
    if absent:
        return (
            f"The arguments of {schema.name} miss the required field "
            f"{', '.join(repr(a) for a in absent)}. Call it again with "
            f"{', '.join(repr(a) for a in required)}."
        )
    return None


def _object(arguments: str, tool: str) -> dict[str, Any] | str:
    try:
        value = parse_json(arguments or "{}")
    except DecodeError as exc:
        return f"The arguments of {tool} are not valid JSON ({exc}). Send a JSON object."
    if not isinstance(value, dict):
        return f"The arguments of {tool} must be a JSON object, not {type(value).__name__}."
    return value


def dispatch(registry: Registry, name: str, arguments: str) -> Local | Port:
    """Decide who answers a tool call; never raises."""
    args = _object(arguments, name)
    if isinstance(args, str):
        return Local(args)
    if name == FIND_TOOL.name:
        if (problem := _missing(FIND_TOOL, args)) is not None:
            return Local(problem)
        found = registry.find(str(args["query"]))
        if not found:
            return Local("No tool matches.")
        schemas = encode([unstructure(schema) for schema in found]).decode()
        return Local(f"{schemas}\nCall it with call_tool.")
    if name == CALL_TOOL.name:
        if (problem := _missing(CALL_TOOL, args)) is not None:
            return Local(problem)
        target, inner = args["name"], args["arguments"]
        entry = registry.get(target) if isinstance(target, str) else None
        if entry is None or entry.core:
            return Local(f"Unknown tool {target!r} for call_tool. Use find_tool to find one.")
        if not isinstance(inner, dict):
            return Local(f"The arguments for {target} must be a JSON object.")
        if (problem := _missing(entry.schema, inner)) is not None:
            return Local(problem)
        return Port(entry.schema.name, encode(inner).decode())
    entry = registry.get(name)
    if entry is not None and entry.core:
        if (problem := _missing(entry.schema, args)) is not None:
            return Local(problem)
        return Port(name, encode(args).decode())
    hint = " Use call_tool to call it." if entry is not None else " Use find_tool to find one."
    return Local(f"Unknown tool {name!r}.{hint}")


def response_text(response: ToolResponse) -> tuple[str, DataClass, bool, bool]:
    """A port's answer as the tool result's content, class, untrusted and truncated flags."""
    match response:
        case ResultResponse(content=content, data_class=kind, untrusted=untrusted, truncated=cut):
            return content, kind, untrusted, cut
        case FailedResponse(message=message):
            return f"The tool failed: {message}", DataClass.PUBLIC, False, False
        case DeniedResponse(reason=reason):
            return f"The call was denied: {reason}", DataClass.PUBLIC, False, False
        case PendingApprovalResponse():
            text = (
                "This call needs the owner's approval, and this version of Boxmaker cannot wait "
                "for it; it was not run. Tell the owner what you wanted to do."
            )
            return text, DataClass.PUBLIC, False, False
    raise TypeError(f"not a tool response: {response!r}")


def cap_result(text: str, cap: int) -> tuple[str, bool]:
    """At most `cap` bytes of UTF-8, cut at a character boundary, then `[truncated]`."""
    data = text.encode()
    if len(data) <= cap:
        return text, False
    return data[:cap].decode(errors="ignore") + TRUNCATED, True
