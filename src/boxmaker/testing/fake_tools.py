"""`FakeTools`: a tool port in process, for tests: `clock` (the current time, RFC 3339),
`echo` (its `text`) and `find_tool` over those two; the tools named in `ask` wait for the
owner's approval (`pending_approval`), as brokerd's do under an `ask` grant."""

from __future__ import annotations

from collections.abc import Collection

from ..brokerd.policy.asking import detail
from ..brokerd.registry import Registry, RegistryEntry
from ..clock import Clock
from ..proto import (
    Answer,
    DataClass,
    DecodeError,
    DeniedResponse,
    FailedResponse,
    PendingApprovalResponse,
    RecallFrame,
    ResultResponse,
    SessionId,
    ToolRequest,
    ToolResponse,
    encode,
    parse_json,
    unstructure,
)
from ..tools.schemas import CLOCK, ECHO, FIND_TOOL

__all__ = ["FakeTools"]

_REGISTRY = Registry(tuple(RegistryEntry.of(s, s is not ECHO) for s in (FIND_TOOL, CLOCK, ECHO)))


class FakeTools:
    def __init__(self, clock: Clock, ask: Collection[str] = ()) -> None:
        self._clock = clock
        self._ask = set(ask)
        self.requests: list[ToolRequest] = []
        self.answers: list[tuple[str, Answer]] = []
        self._waiting: dict[str, ToolRequest] = {}
        self.recalled: list[RecallFrame] = []  # auto-recalls asked for, answered `recall`
        self.recall = ""  # what each auto-recall answers ("": nothing passed the threshold)
        self.changed: list[SessionId] = []
        self.results: dict[str, ToolResponse] = {}  # a tool's answer, given by a test

    async def call(self, request: ToolRequest) -> ToolResponse:
        self.requests.append(request)
        if request.tool in self._ask:
            id = f"a-{request.call}"
            self._waiting[id] = request
            try:  # as brokerd, from what the model wrote
                arguments = parse_json(request.arguments or "{}")
            except DecodeError:
                arguments = None
            shown = detail(arguments) if isinstance(arguments, dict) else ""
            return PendingApprovalResponse(id, f"{request.tool} {request.arguments}", shown)
        return self._run(request)

    async def approve(self, session: SessionId, id: str, answer: Answer) -> ToolResponse:
        self.answers.append((id, answer))
        request = self._waiting.pop(id, None)
        if request is None or request.session != session:
            return FailedResponse(f"no call waits as {id}")
        if answer is Answer.DENY:
            return DeniedResponse("the owner said no")
        if answer is not Answer.ONCE:
            self._ask.discard(request.tool)
        return self._run(request)

    async def auto_recall(self, frame: RecallFrame) -> ToolResponse:
        self.recalled.append(frame)
        return ResultResponse(self.recall, DataClass.PRIVATE, False, False)

    async def session_changed(self, session: SessionId) -> None:
        self.changed.append(session)

    def _run(self, request: ToolRequest) -> ToolResponse:
        if request.tool in self.results:
            return self.results[request.tool]
        try:
            arguments = parse_json(request.arguments)
        except DecodeError as exc:
            return FailedResponse(f"{request.tool}'s arguments are not JSON: {exc}")
        if not isinstance(arguments, dict):
            return FailedResponse(f"{request.tool}'s arguments are not an object")
        if request.tool == "clock":
            return ResultResponse(str(self._clock.now()), DataClass.PUBLIC, False, False)
        if request.tool == "echo":
            return ResultResponse(str(arguments.get("text")), DataClass.PUBLIC, False, False)
        if request.tool == "find_tool":
            found, _more = _REGISTRY.find(str(arguments.get("query", "")))
            if not found:
                return ResultResponse("No tool matches.", DataClass.PUBLIC, False, False)
            schemas = encode([unstructure(schema) for schema in found]).decode()
            text = f"{schemas}\nCall it with call_tool."
            return ResultResponse(text, DataClass.PUBLIC, False, False)
        return FailedResponse(f"FakeTools has no tool {request.tool!r}")
