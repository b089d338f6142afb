"""The tool port: where tool calls are run. loopd's is a client of brokerd's socket
(`loop.broker_port.BrokerPort`); the test kit's is `testing.FakeTools`, in process."""

from __future__ import annotations

from typing import Protocol

from ..proto import Answer, SessionId, ToolRequest, ToolResponse

__all__ = ["ToolPort"]


class ToolPort(Protocol):
    """Runs a call, or says it waits for the owner (`pending_approval`); `approve` gives the
    owner's answer to a waiting call, answered with the call's own response."""

    async def call(self, request: ToolRequest) -> ToolResponse: ...

    async def approve(self, session: SessionId, id: str, answer: Answer) -> ToolResponse: ...
