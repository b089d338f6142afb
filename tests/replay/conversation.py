"""The conversation the replay tests record: tool calls, an approval, a soft break (the golden
session `replay-tools` is this one, and `test_basic` records it afresh)."""

from __future__ import annotations

from typing import Any

import attrs

from boxmaker import proto as p
from boxmaker.loopd.loop import Approvals
from boxmaker.testing.fake_server import Reply

from ..helpers import NoMemory, Rig
from ..loop.test_steer import Box
from ..loop.test_turn import call_tool, turn

__all__ = ["TOOLS_SCRIPT", "Asking", "Owner", "record_tools"]


class Asking(NoMemory):
    """brokerd asking the owner about every call, then answering it with its result."""

    async def call(self, request: p.ToolRequest) -> p.ToolResponse:
        return p.PendingApprovalResponse(f"ask-{request.call}", "clock")

    async def approve(self, session: p.SessionId, id: str, answer: p.Answer) -> p.ToolResponse:
        return p.ResultResponse("12:00", p.DataClass.PUBLIC, untrusted=False, truncated=False)


class Owner(Approvals):
    async def wait(self, *args: Any, **kwargs: Any) -> p.Answer | None:
        return p.Answer.ONCE


async def record_tools(rig: Rig) -> None:
    """Tool calls, an approval, a soft break."""
    await turn(rig, "Echo hi.")
    tools = rig.runtime.port
    rig.runtime = attrs.evolve(rig.runtime, port=Asking(), approvals=Owner())
    await turn(rig, "What time is it?", can_ask=lambda: True)
    rig.runtime = attrs.evolve(rig.runtime, port=tools)
    box = Box()
    box.waiting.append("And say thanks.")  # taken at the first step's end
    await turn(rig, "Echo a, then b.", steer=box)


TOOLS_SCRIPT = [
    Reply(tool_calls=[call_tool("echo", text="hi")]),
    Reply(content="It said hi."),
    Reply(tool_calls=[("clock", "{}")]),
    Reply(content="It is noon."),
    Reply(tool_calls=[call_tool("echo", text="a")]),
    Reply(tool_calls=[call_tool("echo", text="b")]),
    Reply(content="a, b. Thanks!"),
]
