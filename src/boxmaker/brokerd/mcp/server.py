"""One configured MCP server, kept running by brokerd (SPEC section 16).

`McpServer.run` starts the server (in the sandbox where one works, unless its config says
otherwise), initializes it with the SDK's `ClientSession` over `mcp_wire`, lists its tools
(every page) within `start_timeout_s`, and gives them to the registry; a `tools/list_changed`
lists them again. Whatever ends a connection (the server exits, hangs in `initialize`, writes
what is not JSON-RPC or a line past `message_mb`, leaves a call unanswered past `timeout_s`)
is said in its state, and the server is started again after a backoff (1 s, doubling to 60 s;
back to 1 s once it has served a minute). A call while it is down is answered at once, saying
why. Nothing a server does can hold a call past its timeout or end brokerd.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import mcp.types as types
import trio
from attrs import frozen
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from ...clock import Clock, SystemClock
from ...config import McpServerConfig
from ...proto import DataClass, FailedResponse, Timestamp, ToolResponse
from ..files._walk import clean
from ..files.roots import closed_over
from ..registry import McpTool
from ..sandbox.bwrap import Reach, Sandbox
from ..sandbox.spawn import Child
from .adapt import MOST_TOOLS, listed_tools, result_of
from .install import MissingCommand, installed
from .wire import Tail, Wire, connect

__all__ = ["McpServer", "ServerState"]

log = logging.getLogger("brokerd")

FIRST_BACKOFF_S = 1.0
LAST_BACKOFF_S = 60.0
STEADY_S = 60.0  # served this long, the next fault starts the backoff again from its first
MOST_PAGES = 100  # of one tools/list


@frozen
class ServerState:
    """What `bxctl tools` shows of a server."""

    name: str
    state: str  # "starting", "ready", "down"
    reason: str  # why it is down, where it runs, what was left out of its list
    tools: int
    restarts: int
    stderr: tuple[str, ...]
    listed: Timestamp | None = None  # when it last gave its list of tools


class McpServer:
    """A server's process, connection and tools, for brokerd's life."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        sandbox: Sandbox | None,
        on_tools: Callable[[str, Sequence[McpTool]], None],
        *,
        call_limit: float,
        environ: Mapping[str, str] | None = None,
        backoff: float = FIRST_BACKOFF_S,
        guarded: Sequence[Path] = (),
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.sandbox = sandbox
        self.on_tools = on_tools
        self.call_timeout = min(config.timeout_s, call_limit)
        self.call_limit = call_limit  # the most a call (find_tool's wait too) may take
        self.clock = clock or SystemClock()
        self.listed: Timestamp | None = None  # when it last gave its list
        self.first_listed = trio.Event()  # set once it has given one
        self.born: float | None = None  # when brokerd first started it (trio's clock)
        self.tail = Tail(name)
        self.state, self.reason, self.restarts = "starting", "", 0
        self.tools: dict[str, McpTool] = {}  # by the registry's name
        self.left_out: list[str] = []
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self.guarded = tuple(guarded)  # brokerd's own places: no folder shown may hold one
        self.read: tuple[Path, ...] = ()  # the folders its last start showed it
        self._first_backoff = backoff
        self.changed = trio.Event()  # set (and made anew) whenever its state or tools change
        self._session: ClientSession | None = None
        self._connection: trio.CancelScope | None = None
        self._wire: Wire | None = None  # the connection's: it says why it ended before it ends
        self._restarted: str | None = None  # why brokerd ended the connection itself

    def _changed(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def status(self) -> ServerState:
        said = [self.reason] if self.reason else []
        if self.left_out:
            said.append(f"left out of its list: {'; '.join(self.left_out[:5])}")
        return ServerState(
            self.name,
            self.state,
            "; ".join(said),
            len(self.tools),
            self.restarts,
            self.tail.lines(),
            self.listed,
        )

    async def first_listing(self) -> bool:
        """Wait for its first list, at most until `start_timeout_s` after brokerd first
        started it and `call_limit` from now; whether it has given one."""
        if not self.first_listed.is_set():
            born = self.born if self.born is not None else trio.current_time()
            until = min(born + self.config.start_timeout_s, trio.current_time() + self.call_limit)
            with trio.move_on_at(until):
                await self.first_listed.wait()
        return self.first_listed.is_set()

    async def run(self) -> None:
        """Serve, and start again after each fault, until cancelled."""
        self.born = trio.current_time()
        backoff = self._first_backoff
        while True:
            started = trio.current_time()
            self.state = "starting"
            self.tail.restart()
            fault = self._explained(await self._serve())
            if trio.current_time() - started >= STEADY_S:
                backoff = self._first_backoff
            self.state, self.reason = "down", f"{fault}; starting again in {backoff:g} s"
            log.warning("mcp %s: %s", self.name, self.reason)
            self._changed()
            await trio.sleep(backoff)
            backoff = min(backoff * 2, LAST_BACKOFF_S)
            self.restarts += 1
            self._changed()

    async def call(
        self, tool: McpTool, arguments: dict[str, Any], data_class: DataClass
    ) -> ToolResponse:
        """Run `tool` with `arguments`: its result, or a failure saying what happened."""
        session, connection, wire = self._session, self._connection, self._wire
        name = tool.schema.name
        if session is None or self.state != "ready":
            return self.down()
        try:
            with trio.fail_after(self.call_timeout):
                result = await session.call_tool(tool.remote, arguments)
        except trio.TooSlowError:
            self._restart(
                connection, f"a call of {name} had no answer within {self.call_timeout:g} s"
            )
            return FailedResponse(
                f"{name} did not answer within {self.call_timeout:g} s; the server is started "
                "again. Whether the call had an effect is not known: check before calling again"
            )
        except MCPError as exc:  # what follows is the server's word: untrusted
            if exc.error.code == types.CONNECTION_CLOSED:
                why = (wire.fault if wire else None) or _said(exc)
                return FailedResponse(
                    f"the MCP server {self.name} went down during the call ({why}); whether "
                    "the call had an effect is not known: check before calling again",
                    untrusted=True,
                )
            said = f"{name}: the server answered with an error: {_said(exc)}"
            return FailedResponse(said, untrusted=True)
        if not isinstance(result, types.CallToolResult):
            return FailedResponse(f"{name}: the server answered what is not a tool's result")
        return result_of(result, data_class)

    def down(self) -> FailedResponse:
        """The answer to a call while the server is not ready: at once, saying why (its
        reason may quote the server: untrusted)."""
        why = f" ({self.reason})" if self.reason else ""
        return FailedResponse(
            f"not run: the MCP server {self.name} is {self.state}{why}", untrusted=bool(self.reason)
        )

    def _restart(self, connection: trio.CancelScope | None, why: str) -> None:
        """End `connection` (a call's: a later one is left alone) to start the server again."""
        if connection is not None and connection is self._connection:
            self._restarted = why
            connection.cancel()

    async def _serve(self) -> str:
        """Serve one connection of the server: why it ended."""
        relist = trio.Event()
        doing = "initialize and list its tools"
        self._wire = None

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                relist.set()

        self._restarted = None
        connection = self._connection = trio.CancelScope()
        most_line = self.config.message_mb * 1024**2
        try:
            async with (
                self._process() as child,
                connect(child, most_line, self.tail, connection.cancel) as (read, write, wire),
            ):
                self._wire = wire
                with connection:
                    async with _Session(read, write, message_handler=on_message) as session:
                        with trio.fail_after(self.config.start_timeout_s):
                            await session.initialize()
                            await self._list(session)
                        self._session, self.state, self.reason = session, "ready", self._where()
                        log.info(
                            "mcp %s: ready, %d tools (%s)", self.name, len(self.tools), self.reason
                        )
                        self._changed()
                        doing = "list its tools again"
                        while True:
                            await relist.wait()
                            relist = trio.Event()
                            with trio.fail_after(self.config.start_timeout_s):
                                await self._list(session)
                # While its process is ended: calls are answered at once, saying so.
                self._session, self.state, self.reason = None, "down", "its connection ended"
            return self._restarted or wire.fault or "its connection ended"
        except Exception as exc:  # whatever the server did is its fault, never brokerd's end
            leaf = _leaf(exc)
            if isinstance(leaf, _Fault):
                return str(leaf)
            if isinstance(leaf, trio.TooSlowError):
                return f"it did not {doing} within {self.config.start_timeout_s:g} s"
            if self._wire is not None and self._wire.fault is not None:
                return self._wire.fault
            if not isinstance(
                leaf, OSError | MCPError | anyio.BrokenResourceError | anyio.ClosedResourceError
            ):
                log.exception("mcp %s: the connection failed", self.name)
            return _said(leaf)
        except BaseExceptionGroup as group:
            # Stopped from outside (brokerd ends, or starts it again) as the server also
            # failed (its start time ran out at that moment): the stop wins, and the
            # server's fault goes with it, never up to brokerd's own tasks.
            cancelled, _ = group.split(trio.Cancelled)
            if cancelled is None:
                raise
            raise cancelled from None
        finally:
            self._session = None

    async def _list(self, session: ClientSession) -> None:
        """Every page of its tools, until `MOST_PAGES` pages or `MOST_TOOLS` tools (what was
        left unread is said)."""
        listed: list[types.Tool] = []
        cursor = None
        for _page in range(MOST_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            listed += page.tools[: MOST_TOOLS + 1 - len(listed)]
            if not (cursor := page.next_cursor) or len(listed) > MOST_TOOLS:
                break
        tools, self.left_out = listed_tools(self.name, listed)
        if cursor:
            self.left_out.append(f"the pages past the first {MOST_PAGES} or {MOST_TOOLS} tools")
        self.tools = {tool.schema.name: tool for tool in tools}
        self.on_tools(self.name, tools)
        self.listed = self.clock.now()
        self.first_listed.set()
        self._changed()

    def _where(self) -> str:
        if self.confined:
            return "in the sandbox" + (", with the network" if self.config.network else "")
        if self.config.sandbox is False:
            return "not in a sandbox (its config says so)"
        return f"not in a sandbox (none works here: {self.sandbox and self.sandbox.reason})"

    @property
    def confined(self) -> bool:
        """Whether it runs in the sandbox (a working one, and its config does not say no)."""
        working = self.sandbox is not None and self.sandbox.working
        return working and self.config.sandbox is not False

    def _explained(self, fault: str) -> str:
        """`fault`, with what to do when the sandbox could not see or read the program (as
        bwrap and the system say it on stderr)."""
        said = " ".join(self.tail.lines()[-3:])
        if "execvp" in said and "No such file or directory" in said:
            return (
                f"{fault}: the sandbox cannot see its program ({said[-200:]}); add the "
                f"folder it is installed in to [mcp.{self.name}] read"
            )
        user = self.sandbox.user if self.sandbox is not None else None
        if "Permission denied" in said and user is not None:
            return (
                f"{fault}: it runs as the sandbox's user (uid {user[0]}), who cannot read "
                f"what it needs ({said[-200:]}): install it where every user may read "
                "it"
            )
        return fault

    @contextlib.asynccontextmanager
    async def _process(self) -> AsyncIterator[Child]:
        if self.sandbox is None:
            raise _Fault("brokerd has no sandbox object to start it with")
        if self.config.sandbox is True and not self.confined:
            raise _Fault(
                f"its config asks for the sandbox, and none works here: {self.sandbox.reason}"
            )
        command = list(self.config.command)
        try:
            path = self._environ.get("PATH", os.defpath)
            command[0], trees = await trio.to_thread.run_sync(
                installed, command, path, self.guarded
            )
        except MissingCommand as error:
            raise _Fault(str(error)) from None
        read = tuple(dict.fromkeys((*self.config.read, *(trees if self.confined else ()))))
        for folder in read:
            closed = closed_over(self.sandbox.roots, PurePosixPath(folder))
            if closed is not None and self.confined:
                raise _Fault(
                    f"it would be shown {folder}, which is in {closed.shown}, closed to "
                    "every tool: it is not started"
                )
        self.read = read
        env = tuple((key, self._environ[key]) for key in self.config.env if key in self._environ)
        reach = Reach(read, self.config.network, env, cpu_limited=False, workdir="/")
        # Never the workspace by default: a command may plant a module there for it to import.
        cwd = (self.config.cwd or Path("/")) if not self.confined else None
        async with self.sandbox.running(
            command, stdin_pipe=True, stderr_pipe=True, confined=self.confined, reach=reach, cwd=cwd
        ) as run:
            yield run.process


class _Session(ClientSession):
    """The SDK's session, without its check of a result's `structuredContent` against the
    tool's `outputSchema`: that runs the server's patterns with `re`, unbounded, on brokerd's
    loop (and lists the tools again, unasked, for a tool it has not seen). The result is shown
    to the model as untrusted text whatever it holds."""

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        return None


class _Fault(Exception):
    """What ended a server's connection, as its state says it."""


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside the groups the SDK's task groups wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _said(exc: BaseException) -> str:
    """An error as a line (the server's words in it escaped)."""
    said = exc.error.message if isinstance(exc, MCPError) else f"{type(exc).__name__}: {exc}"
    return clean(said[:500])
