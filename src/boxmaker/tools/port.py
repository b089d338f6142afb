"""The tool port: where tool calls are run. loopd's is a client of brokerd's socket
(`serving.broker_port.BrokerPort`); the test kit's is `testing.FakeTools`, in process."""

from __future__ import annotations

from typing import Protocol

from ..proto import Answer, RecallFrame, SessionId, ToolRequest, ToolResponse

__all__ = ["ToolPort"]


class ToolPort(Protocol):
    """Runs a call, or says it waits for the owner (`pending_approval`); `approve` gives the
    owner's answer to a waiting call, answered with the call's own response. `auto_recall`
    answers what memory holds of a turn's message (an empty result: nothing that passes the
    threshold); `session_changed` says a session's log grew, for the recall index."""

    async def call(self, request: ToolRequest) -> ToolResponse: ...

    async def approve(self, session: SessionId, id: str, answer: Answer) -> ToolResponse: ...

    async def auto_recall(self, frame: RecallFrame) -> ToolResponse: ...

    async def session_changed(self, session: SessionId) -> None: ...
