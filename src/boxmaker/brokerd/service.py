"""brokerd's work apart from its socket: the registry, the grants, the calls that wait for
the owner, and running a call (SPEC section 14).

A call is checked before anything runs, in this order: the tool exists; the session's
definition of it (its hash, from the session's baseline) is brokerd's (a session keeps the
semantics it was made with: a call brokerd can no longer honour so is refused, never run
with new ones); its arguments fit the schema; the policy's verdict (the path's root, then the
tool's grant, or the session's; an MCP tool's for the definition it names), the session's
mode, the taint (`policy/decide.py`). `deny` is refused with the reason; `ask` waits for the
owner under a random id (answered by `approve`, by loopd relaying the owner's answer: nothing
the model writes reaches here); `allow` runs, checkpointed when it may change a root
(`undo.py`). The file tools run in a worker thread, bounded (`files/file_tools.py`); `shell`
and `run_cell` in the sandbox (`hands.py`); an MCP server's tools by their server.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio
from attrs import frozen

from .. import layout
from ..clock import Clock
from ..config import CheckpointsConfig, MemoryConfig, SchedulesConfig, ToolsConfig
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
    ToolsFrame,
    UndoFrame,
    parse_json,
)
from ..tools import FIND_TOOL, RECALL, check_arguments, failed, local
from .files._walk import clean
from .files.file_tools import FileLimits, run_file_tool
from .files.preview import change_of
from .files.put import FOLDERS, Owner
from .files.roots import FILE_TOOLS, Root, fence_of, highest, inside, shown_class
from .files.search import SEARCHES_AT_ONCE
from .find_tool import find_text, find_tool
from .hands import Hands
from .listing import listing
from .memory_tools import MEMORY, Memory
from .policy.asking import detail, question
from .policy.decide import decide_call
from .policy.grants import SessionGrants
from .policy.rules import Decision, Policy, PolicyError, Verdict
from .policy.write import write_always
from .registry import SANDBOXED, McpTool, Registry, server_of
from .schedule_tools import SCHEDULES, Schedules
from .undo import Checkpointing, UndoAnswer

if TYPE_CHECKING:  # the MCP SDK is imported only by a brokerd with servers to run
    from .mcp.server import McpServer

__all__ = ["MOST_PENDING", "Broker", "find_text"]  # find_text: brokerd's own, re-exported

log = logging.getLogger("brokerd")
_APPROVAL_TIMEOUT_S = cast(float, attrs.fields(ToolsConfig).approval_timeout_s.default)  # config's

_CHANGED = "{} while the owner was asked; it was not run: call it again to be asked as it is now"
MOST_PENDING = 256  # calls waiting for the owner at once; past it the oldest is dropped


@frozen
class _Pending:
    request: ToolRequest
    arguments: dict[str, Any]
    verdict: Verdict
    since: float
    definition: str  # the tool's as the owner is asked: it runs only while it has it
    change: str = ""  # the diff the owner is shown (a file tool's): it runs only while it holds


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
        approval_timeout: float = _APPROVAL_TIMEOUT_S,
        limits: FileLimits | None = None,
        hands: Hands | None = None,
        threads: bool = True,
        memory: Memory | None = None,
        schedules: Schedules | None = None,
        checkpoints: Checkpointing | None = None,
    ) -> None:
        self.registry, self.policy, self.clock = registry, policy, clock
        self.workspace = PurePosixPath(workspace)
        self.approval_timeout = approval_timeout
        self.limits = limits or FileLimits()
        self.hands = hands  # None: shell and run_cell are denied (no sandbox was looked for)
        self.grants = SessionGrants(lambda session: layout.session_grants(home, session))
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._policy_lock = trio.Lock()
        self.calls = 0  # run, for the status line
        self._threads = threads  # else the file tools run in the event loop (a test's choice)
        self._searches = trio.CapacityLimiter(SEARCHES_AT_ONCE)
        self.servers: dict[str, McpServer] = {}  # the MCP servers, by name (brokerd adds them)
        # The notes and the recall index (its `serve` keeps it up to date, in brokerd's nursery).
        self.memory = memory or Memory(home, clock, MemoryConfig(), threads=threads)
        self.schedules = schedules or Schedules(home, clock, SchedulesConfig(), threads=threads)
        self.checkpoints = checkpoints or Checkpointing(home, CheckpointsConfig(), threads=threads)

    def _owner(self, root: Root) -> Owner:
        """Who what a file tool makes in `root` belongs to: under root, the sandbox's user in
        the workspace (the sandbox writes there), else whoever owns the folder it is made in
        (a root of the owner's stays theirs); under another user, that user."""
        user = self.hands.sandbox.user if self.hands is not None else None
        if user is None:
            return None
        workspace = self.policy.workspace_root(self.workspace)
        in_workspace = root.path == workspace.path or inside(root.path, workspace.path)
        return user if in_workspace else FOLDERS

    def roots(self) -> tuple[Root, ...]:
        """The workspace, then every root the policy grants."""
        return (self.policy.workspace_root(self.workspace), *self.policy.roots)

    def update_tools(self, server: str, tools: Sequence[McpTool]) -> None:
        """`server` listed `tools`: they replace its others in the registry."""
        self.registry = self.registry.with_server(server, tools)

    def status(self) -> str:
        return f"{self.calls} calls run; {len(self._pending)} waiting for the owner"

    def listing(self) -> ToolsFrame:
        """Every tool with its hash and grant, every root the file tools may reach, and the MCP
        servers (`listing.py`)."""
        roots, servers = self.roots(), self.servers.values()
        return listing(self.registry, self.policy, roots, servers, self.checkpoints.said(roots))

    async def undo(self, frame: UndoFrame) -> UndoAnswer:
        """The preview of an undo of a session's changes, or (confirmed) the undo done."""
        return await self.checkpoints.undo(frame, self.roots())

    async def call(self, request: ToolRequest) -> ToolResponse:
        """Check the call, then run it, refuse it, or make it wait for the owner."""
        entry = self.registry.get(request.tool)
        server = self.servers.get(server_of(request.tool) or "")
        if server is not None and server.state != "ready":  # answered at once, never asked
            return server.down()
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
            return failed(f"The arguments of {request.tool} are not valid JSON ({exc}).")
        if not isinstance(arguments, dict):
            return failed(f"The arguments of {request.tool} must be a JSON object.")
        if (problem := check_arguments(entry.schema, arguments)) is not None:
            return failed(problem)
        held = self.grants.of(request.session, request.identity)
        decided = partial(
            decide_call,
            self.policy,
            entry,
            arguments,
            held,
            workspace=self.workspace,
            tainted=request.tainted,
            sandbox=self.hands.sandbox if self.hands is not None else None,
            network=server is not None and server.config.network,
            mode=request.mode,
        )
        if entry.schema.name == "shell" and self.policy.prefixes:  # a line read: off the loop
            verdict = await trio.to_thread.run_sync(decided)
        else:
            verdict = decided()
        if verdict.decision is Decision.DENY:
            log.info(
                "call %s of %s: %s denied: %s",
                request.call,
                request.session,
                request.tool,
                verdict.reason,
            )
            return DeniedResponse(verdict.reason)
        if verdict.decision is Decision.ASK:
            change = await self._diff(request.tool, arguments, verdict)
            return self._wait(request, arguments, verdict, entry.definition, change)
        return await self._run(request, arguments, verdict)

    async def auto_recall(self, frame: RecallFrame) -> ToolResponse:
        """Auto-recall for a turn of `frame.session`, while the policy allows `recall` (no one
        is asked for it: an empty result otherwise)."""
        if self.policy.grant(RECALL.name).decision is not Decision.ALLOW:
            return local("")
        return await self.memory.auto_recall(frame)

    async def session_changed(self, session: SessionId) -> None:
        """`session`'s log grew: the recall index reads it in the background."""
        self.memory.changed(session.value)

    async def session_removed(self, session: SessionId, identity: str = "") -> None:
        """`session` (as `identity`; "": whichever) was removed: its grants and its interpreter
        end (a new session that takes its id is another, and has neither: they are kept for
        its identity alone)."""
        await trio.to_thread.run_sync(self.grants.end, session, identity)
        if self.hands is not None:
            self.hands.kernels.end(session, identity)
        for id in [
            id
            for id, waiting in self._pending.items()
            if waiting.request.session == session
            and (not identity or waiting.request.identity == identity)
        ]:
            del self._pending[id]  # nothing it asked may still be answered
        log.info("session %s removed: its grants and its interpreter ended", session)

    def _unchanged(self, tool: str, definition: str) -> bool:
        entry = self.registry.get(tool)
        return entry is not None and entry.definition == definition

    async def approve(self, session: SessionId, id: str, answer: Answer) -> ToolResponse:
        """The owner's answer to the call waiting as `id`: its own response, or a refusal."""
        self._expire()
        pending = self._pending.get(id)
        if pending is None or pending.request.session != session:
            return FailedResponse(f"no call waits for an answer as {id!r}; it was not run")
        del self._pending[id]
        tool = pending.request.tool
        entry = self.registry.get(tool)
        if entry is None or not self._unchanged(tool, pending.definition):
            return FailedResponse(_CHANGED.format(f"{tool} changed (or left)"))
        log.info("call %s of %s: %s answered %s", pending.request.call, session, tool, answer.value)
        if answer is Answer.DENY:
            return DeniedResponse("the owner said no; it was not run")
        if pending.change and await self._diff(tool, pending.arguments, pending.verdict) != (
            pending.change
        ):  # what the owner saw is not what it would do now
            return FailedResponse(_CHANGED.format(f"the file {tool} writes changed"))
        note = ""
        pinned = entry.definition if entry.mcp is not None else None
        if pending.verdict.only_once and answer in (Answer.SESSION, Answer.ALWAYS):
            answer = Answer.ONCE  # asked by the session's ask mode: no grant is kept
        if answer is Answer.SESSION:
            held = tool if pinned is None else f"{tool}@{pinned}"
            identity = pending.request.identity
            await trio.to_thread.run_sync(self.grants.add, session, identity, held)
        elif answer is Answer.ALWAYS:
            note = await self._allow_always(tool, pinned)
        if not self._unchanged(tool, pending.definition):  # it changed while the grant was kept
            return FailedResponse(_CHANGED.format(f"{tool} changed"))
        response = await self._run(pending.request, pending.arguments, pending.verdict)
        if note and isinstance(response, ResultResponse):
            response = attrs.evolve(response, content=f"{response.content}\n({note})")
        return response

    async def _diff(self, tool: str, arguments: dict[str, Any], verdict: Verdict) -> str:
        """The diff a file tool's call would make now ("" for another tool)."""
        run = partial(change_of, tool, arguments, verdict.located, self.roots(), self.limits)
        return await trio.to_thread.run_sync(run) if self._threads else run()

    async def _allow_always(self, tool: str, definition: str | None) -> str:
        """Write `tool`'s allow into the policy (for `definition`, an MCP tool's); what went
        wrong, if it could not be."""
        async with self._policy_lock:
            try:
                self.policy = await trio.to_thread.run_sync(
                    write_always, self.policy, tool, self.workspace, definition
                )
            except (PolicyError, OSError) as error:
                log.warning("an 'always' for %s was not written to the policy: %s", tool, error)
                return f"allowed once: the policy was not changed: {error}"
        log.info("%s is allowed from now on (written to %s)", tool, self.policy.path)
        return ""

    def _wait(
        self,
        request: ToolRequest,
        arguments: dict[str, Any],
        verdict: Verdict,
        definition: str,
        change: str = "",
    ) -> ToolResponse:
        self._expire()
        while len(self._pending) >= MOST_PENDING:
            self._pending.popitem(last=False)
        id = f"a-{secrets.token_hex(8)}"
        now = trio.current_time()
        self._pending[id] = _Pending(request, arguments, verdict, now, definition, change)
        summary = question(request.tool, arguments, verdict)
        log.info(
            "call %s of %s: %s waits for the owner as %s",
            request.call,
            request.session,
            summary,
            id,
        )
        entry = self.registry.get(request.tool)
        declared = list(entry.schema.parameters.get("properties", {})) if entry else []
        said = detail(arguments, declared, change)
        return PendingApprovalResponse(id, summary, said, only_once=verdict.only_once)

    def _expire(self) -> None:
        """Drop the calls nobody answered in time (loopd has denied them by then)."""
        oldest = trio.current_time() - self.approval_timeout - 60
        for id in [id for id, p in self._pending.items() if p.since < oldest]:
            del self._pending[id]

    async def _run(
        self, request: ToolRequest, arguments: dict[str, Any], verdict: Verdict
    ) -> ToolResponse:
        if request.tool == FIND_TOOL.name:  # a search of the registry: no tool runs
            return await find_tool(lambda: self.registry, self.servers, str(arguments["query"]))
        self.calls += 1
        try:
            entry = self.registry.get(request.tool)
            root = self.checkpoints.unit_of(self.policy, entry, verdict, self.roots())
            if root is None:
                return await self._tool(request, arguments, verdict)
            async with self.checkpoints.around(request, root, self.roots()) as notes:
                response = await self._tool(request, arguments, verdict)
            if notes and isinstance(response, ResultResponse):
                response = attrs.evolve(response, content="\n".join([response.content, *notes]))
            return response
        except Exception as exc:  # a tool's failure is a result, never brokerd's end
            log.exception("%s failed", request.tool)
            said = clean(f"{request.tool} failed: {exc}"[:1000])
            untrusted = server_of(request.tool) is not None  # an MCP server's words
            return FailedResponse(said, untrusted=untrusted)

    async def _tool(
        self, request: ToolRequest, arguments: dict[str, Any], verdict: Verdict
    ) -> ToolResponse:
        tool = request.tool
        if tool == "clock":
            return local(str(self.clock.now()))
        if tool == "echo":
            return local(str(arguments["text"]))
        if tool in FILE_TOOLS and (located := verdict.located) is not None:
            fence = fence_of(located.root, self.roots())
            owner = self._owner(located.root)
            run = (tool, arguments, located, self.limits, fence, owner)
            if not self._threads:
                return run_file_tool(*run)
            limiter = self._searches if tool == "search_files" else None  # each may be big
            return await trio.to_thread.run_sync(run_file_tool, *run, limiter=limiter)
        entry = self.registry.get(tool)
        if entry is not None and entry.mcp is not None:
            server = self.servers.get(entry.server or "")
            if server is None:
                return FailedResponse(f"no MCP server runs {tool}")
            # Its results are as sensitive as what it could read: the workspace (and the open
            # roots in it) in the sandbox; outside it, whatever its user may read.
            read = [PurePosixPath(folder) for folder in server.read]
            shown = shown_class(self.roots(), read) if server.confined else DataClass.SECRET
            data_class = highest(self.policy.server(server.name).data_class, shown)
            try:
                return await server.call(entry.mcp, arguments, data_class)
            finally:
                if self.hands is not None:  # it may have written the workspace
                    with trio.CancelScope(shield=True):
                        await self.hands.sandbox.sweep()
        if tool in MEMORY:
            return await self.memory.call(request, arguments)
        if tool in SCHEDULES:
            return await self.schedules.call(request, arguments)
        if tool in SANDBOXED and self.hands is not None:
            data_class = shown_class(self.roots())  # all a confined run can read
            if not self.hands.sandbox.working:
                data_class = DataClass.SECRET  # unconfined, it reads what brokerd's user can
            return await self.hands.run(
                tool, arguments, request.session, data_class, request.identity
            )
        return FailedResponse(f"brokerd holds {tool!r} but cannot run it")
