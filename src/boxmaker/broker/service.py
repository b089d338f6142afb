"""brokerd's work, apart from its socket: the registry, the policy's grants, the calls that
wait for the owner, and running a call (SPEC section 14).

A call is checked before anything runs, in this order: the tool exists; the session's
definition of it (its hash, from the session's baseline) is brokerd's (a session keeps the
semantics it was made with: a call brokerd can no longer honour so is refused, never run
with new ones); its arguments fit the schema; the policy's verdict (the path's root, then the
tool's grant, or the session's). `deny` is refused with the reason; `ask` waits for the
owner under a random id (answered by `approve`, on another connection, by loopd relaying the
owner's answer: nothing the model writes reaches here); `allow` runs. The file tools run in
a worker thread, each bounded in bytes and time (`files.py`); `shell` and `run_cell` in the
sandbox, or not at all where there is none (`hands.py`).
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from pathlib import Path, PurePosixPath
from typing import Any

import trio
from attrs import frozen

from .. import layout
from ..clock import Clock
from ..proto import (
    Answer,
    DataClass,
    DecodeError,
    DeniedResponse,
    FailedResponse,
    ListedRoot,
    ListedTool,
    PendingApprovalResponse,
    ResultResponse,
    SessionId,
    ToolRequest,
    ToolResponse,
    ToolsFrame,
    encode,
    parse_json,
    unstructure,
)
from ..tools import FIND_TOOL, check_arguments
from ._walk import clean
from .files import FileLimits, run_file_tool
from .grants import SessionGrants
from .hands import SANDBOXED, Hands, confine
from .policy import Decision, Policy, PolicyError, Verdict, decide, write_always
from .registry import Registry
from .roots import FILE_TOOLS

__all__ = ["MOST_PENDING", "Broker", "find_text"]

log = logging.getLogger("brokerd")

MOST_PENDING = 256  # calls waiting for the owner at once; past it the oldest is dropped


def _public(text: str) -> ResultResponse:
    return ResultResponse(text, DataClass.PUBLIC, untrusted=False, truncated=False)


def find_text(registry: Registry, query: str) -> ResultResponse:
    """What `find_tool` answers: the best schemas as JSON text, how many more matched, and
    how to call one; or that none matches."""
    found, more = registry.find(query)
    if not found:
        return _public("No tool matches.")
    schemas = encode([unstructure(schema) for schema in found]).decode()
    also = f"\n{more} more tools match: ask with other words to see them." if more else ""
    return _public(f"{schemas}{also}\nCall it with call_tool.")


@frozen
class _Pending:
    request: ToolRequest
    arguments: dict[str, Any]
    verdict: Verdict
    since: float


class Broker:
    """The registry, the policy and the waiting calls of one brokerd."""

    def __init__(
        self,
        registry: Registry,
        policy: Policy,
        workspace: Path,
        home: Path,
        clock: Clock,
        *,
        approval_timeout: float = 300.0,
        limits: FileLimits | None = None,
        hands: Hands | None = None,
        threads: bool = True,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.workspace = PurePosixPath(workspace)
        self.clock = clock
        self.approval_timeout = approval_timeout
        self.limits = limits or FileLimits()
        self.hands = hands  # None: shell and run_cell are denied (no sandbox was looked for)
        self.grants = SessionGrants(lambda session: layout.session_grants(home, session))
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._policy_lock = trio.Lock()
        self.calls = 0  # run, for the status line
        self._threads = threads  # else the file tools run in the event loop (a test's choice)

    def status(self) -> str:
        return f"{self.calls} calls run; {len(self._pending)} waiting for the owner"

    def listing(self) -> ToolsFrame:
        """Every tool with its hash and grant, and every root the file tools may reach."""
        listed = []
        for entry in self.registry.entries:
            grant = self.policy.grant(entry.schema.name)
            decision, source = grant.decision.value, grant.source
            if entry.schema.name == FIND_TOOL.name:
                decision, source = "allow", "always (a search of the registry)"
            listed.append(ListedTool(entry.schema, entry.definition, entry.core, decision, source))
        roots = [
            ListedRoot(root.name, str(root.path), root.read, root.write, root.data_class)
            for root in (self.policy.workspace_root(self.workspace), *self.policy.roots)
        ]
        return ToolsFrame(tuple(listed), tuple(roots))

    async def call(self, request: ToolRequest) -> ToolResponse:
        """Check the call, then run it, refuse it, or make it wait for the owner."""
        entry = self.registry.get(request.tool)
        if entry is None:
            return FailedResponse(
                f"unknown tool {request.tool!r}; use find_tool to find one, then call_tool"
            )
        if request.definition is not None and request.definition != entry.definition:
            return FailedResponse(
                f"this session was made with another definition of {request.tool}, and "
                "brokerd's has changed since; it does not run a call with other semantics "
                f"than the session was given. A new session has {request.tool} as it is now."
            )
        try:
            arguments = parse_json(request.arguments or "{}")
        except DecodeError as exc:
            return _public(f"The arguments of {request.tool} are not valid JSON ({exc}).")
        if not isinstance(arguments, dict):
            return _public(f"The arguments of {request.tool} must be a JSON object.")
        if (problem := check_arguments(entry.schema, arguments)) is not None:
            return _public(problem)
        if request.tool == FIND_TOOL.name:
            return find_text(self.registry, str(arguments["query"]))
        held = self.grants.of(request.session)
        verdict = decide(self.policy, self.workspace, request.tool, arguments, held)
        if request.tool in SANDBOXED:
            sandbox = self.hands.sandbox if self.hands is not None else None
            verdict = confine(sandbox, self.policy, verdict)
        if verdict.decision is Decision.DENY:
            log.info("call %s of %s: %s denied: %s", request.call, request.session,
                     request.tool, verdict.reason)  # fmt: skip
            return DeniedResponse(verdict.reason)
        if verdict.decision is Decision.ASK:
            return self._wait(request, arguments, verdict)
        return await self._run(request, arguments, verdict)

    async def approve(self, session: SessionId, id: str, answer: Answer) -> ToolResponse:
        """The owner's answer to the call waiting as `id`: its own response, or a refusal."""
        self._expire()
        pending = self._pending.get(id)
        if pending is None or pending.request.session != session:
            return FailedResponse(f"no call waits for an answer as {id!r}; it was not run")
        del self._pending[id]
        tool = pending.request.tool
        log.info("call %s of %s: %s answered %s", pending.request.call, session, tool,
                 answer.value)  # fmt: skip
        if answer is Answer.DENY:
            return DeniedResponse("the owner said no; it was not run")
        note = ""
        if answer is Answer.SESSION:
            await trio.to_thread.run_sync(self.grants.add, session, tool)
        elif answer is Answer.ALWAYS:
            note = await self._allow_always(tool)
        response = await self._run(pending.request, pending.arguments, pending.verdict)
        if note and isinstance(response, ResultResponse):
            response = ResultResponse(f"{response.content}\n({note})", response.data_class,
                                      response.untrusted, response.truncated)  # fmt: skip
        return response

    async def _allow_always(self, tool: str) -> str:
        """Write `tool`'s allow into the policy; what went wrong, if it could not be."""
        async with self._policy_lock:
            try:
                self.policy = await trio.to_thread.run_sync(
                    write_always, self.policy, tool, self.workspace
                )
            except (PolicyError, OSError) as error:
                log.warning("an 'always' for %s was not written to the policy: %s", tool, error)
                return f"allowed once: the policy was not changed: {error}"
        log.info("%s is allowed from now on (written to %s)", tool, self.policy.path)
        return ""

    def _wait(
        self, request: ToolRequest, arguments: dict[str, Any], verdict: Verdict
    ) -> ToolResponse:
        self._expire()
        while len(self._pending) >= MOST_PENDING:
            self._pending.popitem(last=False)
        id = f"a-{secrets.token_hex(8)}"
        self._pending[id] = _Pending(request, arguments, verdict, trio.current_time())
        summary = _summary(request.tool, arguments, verdict)
        log.info("call %s of %s: %s waits for the owner as %s", request.call,
                 request.session, summary, id)  # fmt: skip
        return PendingApprovalResponse(id, summary)

    def _expire(self) -> None:
        """Drop the calls nobody answered in time (loopd has denied them by then)."""
        oldest = trio.current_time() - self.approval_timeout - 60
        for id in [id for id, p in self._pending.items() if p.since < oldest]:
            del self._pending[id]

    async def _run(
        self, request: ToolRequest, arguments: dict[str, Any], verdict: Verdict
    ) -> ToolResponse:
        self.calls += 1
        try:
            return await self._tool(request, arguments, verdict)
        except Exception as exc:  # a tool's failure is a result, never brokerd's end
            log.exception("%s failed", request.tool)
            return FailedResponse(f"{request.tool} failed: {exc}")

    async def _tool(
        self, request: ToolRequest, arguments: dict[str, Any], verdict: Verdict
    ) -> ToolResponse:
        tool = request.tool
        if tool == "clock":
            return _public(str(self.clock.now()))
        if tool == "echo":
            return _public(str(arguments["text"]))
        if tool in FILE_TOOLS and (located := verdict.located) is not None:
            if not self._threads:
                return run_file_tool(tool, arguments, located, self.limits)
            return await trio.to_thread.run_sync(
                run_file_tool, tool, arguments, located, self.limits
            )
        if tool in SANDBOXED and self.hands is not None:
            data_class = self.policy.workspace_class  # all a confined run can read
            if not self.hands.sandbox.working:
                data_class = DataClass.SECRET  # unconfined, it reads what brokerd's user can
            return await self.hands.run(tool, arguments, request.session, data_class)
        return FailedResponse(f"brokerd holds {tool!r} but cannot run it")


SHOWN_WHOLE = 4000  # characters of a command or a cell the owner is shown when asked


def _summary(tool: str, arguments: dict[str, Any], verdict: Verdict) -> str:
    """One line of what a call would do: the tool, and its path (or its arguments, cut); a
    command or a cell whole (the owner approves what they see), up to `SHOWN_WHOLE`."""
    if verdict.located is not None:  # the model's path: no control character reaches a terminal
        return f"{tool} {clean(verdict.located.shown)}"
    if tool in SANDBOXED:
        text = clean(str(arguments.get("code", arguments.get("command", ""))))
        if len(text) > SHOWN_WHOLE:
            left = len(text) - SHOWN_WHOLE
            text = f"{text[:SHOWN_WHOLE]} [CUT: {left:,} more characters not shown]"
        return f"{tool}: {text}"
    shown = clean(encode(arguments).decode())
    return f"{tool} {shown if len(shown) <= 80 else shown[:77] + '...'}"
