"""The tool port: where tool calls are run (`brokerd` later), and `FakeTools`, this
milestone's port in process.
"""

from __future__ import annotations

from typing import Protocol

from ..clock import Clock
from ..proto import (
    DataClass,
    DecodeError,
    FailedResponse,
    ResultResponse,
    ToolRequest,
    ToolResponse,
    parse_json,
)

__all__ = ["FakeTools", "ToolPort"]


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
            try:
                arguments = parse_json(request.arguments)
            except DecodeError as exc:
                return FailedResponse(f"echo's arguments are not JSON: {exc}")
            text = arguments.get("text") if isinstance(arguments, dict) else None
            return ResultResponse(str(text), DataClass.PUBLIC, False, False)
        return FailedResponse(f"FakeTools has no tool {request.tool!r}")
