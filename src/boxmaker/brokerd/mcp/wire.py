"""The stdio transport to one MCP server, in place of the SDK's `stdio_client`: that one keeps a
line however long it grows, passes brokerd's environment on, and ends only its direct child
(so `npx` leaves `node` behind). Here each line the server writes is bounded and must be a
JSON-RPC message, or the connection ends and says why (`Wire.fault`); stderr's last lines are
kept (bounded) for `bxctl tools` and brokerd's log; the process and its group are the caller's
to end (`sandbox.running` kills the group and its cgroup).

`connect` gives the two streams `mcp.ClientSession` reads and writes: anyio memory streams,
so the SDK runs on trio as it does on asyncio.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable

import anyio
import mcp.types as types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..files._walk import clean
from ..sandbox.spawn import Child

__all__ = ["Tail", "Wire", "connect"]

log = logging.getLogger("brokerd")

READ_BYTES = 65536
TAIL_LINES = 20  # stderr lines kept for `bxctl tools`
TAIL_WIDTH = 300  # characters of each kept
LOGGED_LINES = 200  # stderr lines written to brokerd's log per start; the rest are counted
DRAIN_S = 0.5  # to read the last of stderr once the connection ended


class Tail:
    """The last lines a server wrote on stderr, each cut at `TAIL_WIDTH`, at most `TAIL_LINES`
    (of every start: the lines of the one before a fault say why); a line longer than the read
    buffer keeps its end. At most `LOGGED_LINES` of each start go to brokerd's log."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._partial = b""
        self.logged = 0

    def restart(self) -> None:
        """A new start of the server: its log allowance anew, no half line carried over."""
        self._partial = b""
        self.logged = 0

    def feed(self, data: bytes) -> None:
        *whole, self._partial = (self._partial + data).split(b"\n")
        self._partial = self._partial[-READ_BYTES:]
        for raw in whole:
            self._add(raw)

    def _add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        line = clean(line)[:TAIL_WIDTH]
        if not line.strip():
            return
        self._lines.append(line)
        self.logged += 1
        if self.logged <= LOGGED_LINES:
            log.info("mcp %s: %s", self.name, line)
        elif self.logged == LOGGED_LINES + 1:
            log.info(
                "mcp %s: (more stderr; only its last %d lines are kept)", self.name, TAIL_LINES
            )

    def lines(self) -> tuple[str, ...]:
        return tuple(self._lines)


class Wire:
    """One connection's state: why it ended, when it did (None while it runs); `on_end` is
    called when it does (the session would wait on: its requests fail, it does not end)."""

    def __init__(self, on_end: Callable[[], None]) -> None:
        self.fault: str | None = None
        self._on_end = on_end

    def end(self, fault: str) -> None:
        if self.fault is None:
            self.fault = fault
            self._on_end()


@contextlib.asynccontextmanager
async def connect(
    child: Child, most_line: int, tail: Tail, on_end: Callable[[], None]
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        Wire,
    ]
]:
    """The streams to and from `child` (its stdin, stdout and stderr piped), and its `Wire`.
    The read stream ends when the server closes its stdout, writes a line of more than
    `most_line` bytes, or a line that is not JSON-RPC: every waiting request then fails, and
    `on_end` is called."""
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    wire = Wire(on_end)

    async def read() -> None:
        assert child.stdout is not None
        buffer = bytearray()
        async with to_session:
            while True:
                try:
                    data = await child.stdout.receive_some(READ_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    return wire.end(f"its output broke ({exc})")
                if not data:
                    return wire.end("it closed its output (it exited, or stopped talking)")
                start = len(buffer)
                buffer += data
                while (end := buffer.find(b"\n", start)) >= 0:
                    line, buffer = bytes(buffer[:end]), buffer[end + 1 :]
                    start = 0
                    if line.strip() and (problem := await _deliver(line, to_session)):
                        return wire.end(problem)
                if len(buffer) > most_line:
                    return wire.end(
                        f"it sent a message of more than {most_line:,} bytes ([mcp] message_mb)"
                    )

    async def write() -> None:
        assert child.stdin is not None
        async with from_session:
            async for message in from_session:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await child.stdin.send_all(text.encode() + b"\n")
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    wire.end(f"its input broke ({exc})")
                    await to_session.aclose()  # what waits for an answer hears it now
                    return

    drain = trio.CancelScope()

    async def errors() -> None:
        assert child.stderr is not None
        with (
            drain,
            contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError),
        ):
            while data := await child.stderr.receive_some(READ_BYTES):
                tail.feed(data)

    async with trio.open_nursery() as outer:
        outer.start_soon(errors)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            nursery.start_soon(write)
            try:
                yield from_server, to_server, wire
            finally:
                nursery.cancel_scope.cancel()
        if wire.fault is not None:  # it ended: what it said last on stderr may say why
            drain.deadline = trio.current_time() + DRAIN_S
        else:
            drain.cancel()


async def _deliver(
    line: bytes, to_session: MemoryObjectSendStream[SessionMessage | Exception]
) -> str | None:
    """Give one line to the session; what is wrong with it, when it is not JSON-RPC."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        shown = line[:80].decode("utf-8", "replace")
        return f"it wrote what is not JSON-RPC: {shown!r}" + ("..." if len(line) > 80 else "")
    try:
        await to_session.send(SessionMessage(message))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return "the session ended"
    return None
