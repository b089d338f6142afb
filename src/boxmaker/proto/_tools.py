"""The tool port's values: a request to run a tool, and the four ways a port can answer."""

from __future__ import annotations

import enum

from attrs import frozen

from ._ids import SessionId

__all__ = [
    "DataClass",
    "DeniedResponse",
    "FailedResponse",
    "PendingApprovalResponse",
    "ResultResponse",
    "ToolRequest",
    "ToolResponse",
]


class DataClass(enum.Enum):
    """How sensitive a tool result is (only `public` is produced in this milestone)."""

    PUBLIC = "public"
    PRIVATE = "private"
    SECRET = "secret"


@frozen
class ToolRequest:
    """One call to a port tool; `call` counts per session, `arguments` is JSON text."""

    session: SessionId
    call: int
    tool: str
    arguments: str


@frozen
class ResultResponse:
    content: str
    data_class: DataClass
    untrusted: bool
    truncated: bool


@frozen
class FailedResponse:
    message: str


@frozen
class DeniedResponse:
    reason: str


@frozen
class PendingApprovalResponse:
    pass


ToolResponse = ResultResponse | FailedResponse | DeniedResponse | PendingApprovalResponse
