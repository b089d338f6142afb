"""loopd's tool port when brokerd is not what it should be: down, not listening, silent, cut
off, answering garbage or too much, or restarted. Each is a `FailedResponse` that says what
happened and whether the call may have run, never a hang or an exception. The fake brokerds
are a few lines of trio on a real socket: each reads the request, then does one scripted
thing. The real clock: real sockets are in flight."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker import proto as p
from boxmaker.channel import END, MAX_FRAME, NEED_DATA, FrameDecoder, encode_frame
from boxmaker.serving.broker_port import BrokerDown, BrokerPort

from ..helpers import deadline

S1 = p.SessionId("s1")
CALL = p.ToolRequest(S1, 7, "write_file", json.dumps({"path": "a.md", "content": "a"}))
NOT_SENT = ("not sent", "did not run")
MAY_HAVE_RUN = ("may have run", "check its effect before calling it again")

Script = Callable[[trio.SocketStream], Awaitable[None]]


@attrs.define
class FakeBrokerd:
    """What the fake was sent: each connection's request frame."""

    requests: list[p.BrokerFrame] = attrs.field(factory=list)
    connections: int = 0


async def read_request(stream: trio.SocketStream) -> p.BrokerFrame:
    decoder = FrameDecoder(frames=p.BrokerFrame)
    while (frame := decoder.next_frame()) is NEED_DATA:
        decoder.receive_data(await stream.receive_some())
    assert frame is not END
    return frame  # type: ignore[no-any-return]


@asynccontextmanager
async def fake_brokerd(path: Path, script: Script) -> AsyncIterator[FakeBrokerd]:
    """Listen on `path`; on each connection read the request, then run `script`, then close.
    On the way out the socket file is removed, as brokerd does when it stops."""
    fake = FakeBrokerd()
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen()
    listener = trio.SocketListener(sock)

    async def handle(stream: trio.SocketStream) -> None:
        fake.connections += 1
        async with stream:
            try:
                fake.requests.append(await read_request(stream))
                await script(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the port gave up on us

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, handle, [listener])
            yield fake
            nursery.cancel_scope.cancel()
    finally:
        await listener.aclose()
        await trio.Path(path).unlink()


def answer(frame: p.BrokerFrame) -> Script:
    async def script(stream: trio.SocketStream) -> None:
        await stream.send_all(encode_frame(frame))

    return script


def send(data: bytes) -> Script:
    async def script(stream: trio.SocketStream) -> None:
        await stream.send_all(data)

    return script


async def never_answer(stream: trio.SocketStream) -> None:
    await trio.sleep_forever()


async def close_at_once(stream: trio.SocketStream) -> None:
    pass


def result(text: str) -> p.ResultResponse:
    return p.ResultResponse(text, p.DataClass.PUBLIC, untrusted=False, truncated=False)


def failure(response: p.ToolResponse, *phrases: str) -> str:
    """The message of a FailedResponse that holds every one of `phrases`."""
    assert isinstance(response, p.FailedResponse), response
    for phrase in phrases:
        assert phrase in response.message, (phrase, response.message)
    return response.message


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "broker.sock"


# --- nothing is sent ----------------------------------------------------------------------------


async def test_with_nothing_listening_the_call_was_not_sent(path: Path) -> None:
    port = BrokerPort(path, call_timeout=30)
    with deadline(5, "the port with no socket file"):
        response = await port.call(CALL)
        approval = await port.approve(S1, "a-1", p.Answer.ONCE)
    message = failure(response, "brokerd is not running", str(path), *NOT_SENT)
    assert "No such file or directory" in message
    failure(approval, "brokerd is not running", *NOT_SENT)


async def test_a_socket_file_nobody_listens_on_is_not_running(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as left:  # what a brokerd killed with SIGKILL leaves
        left.bind(str(path))
    port = BrokerPort(path, call_timeout=30)
    with deadline(5, "the port with a stale socket file"):
        response = await port.call(CALL)
    assert "Connection refused" in failure(response, "brokerd is not running", *NOT_SENT)


async def test_a_file_that_is_not_a_socket_is_not_connected_to(path: Path) -> None:
    await trio.Path(path).write_text("not a socket\n")
    with deadline(5, "the port with a regular file"):
        response = await BrokerPort(path, call_timeout=30).call(CALL)
    assert response == p.FailedResponse(f"{path} is not a socket; nothing was sent to it")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a socket to another user takes root")
async def test_a_socket_file_of_another_user_is_not_connected_to(path: Path) -> None:
    async with fake_brokerd(path, answer(p.ResponseFrame(result("ran")))) as fake:
        os.chown(path, 4242, 4242)
        with deadline(5, "the port with another user's socket"):
            response = await BrokerPort(path, call_timeout=30).call(CALL)
    failure(response, "belongs to uid 4242, not to you", "nothing was sent")
    assert fake.connections == 0


# --- sent, and then something went wrong --------------------------------------------------------


async def test_a_brokerd_that_never_answers_is_given_up_on_after_the_call_timeout(
    path: Path,
) -> None:
    async with fake_brokerd(path, never_answer) as fake:
        port = BrokerPort(path, call_timeout=0.25)
        with deadline(5, "the call timeout"):
            start = trio.current_time()
            response = await port.call(CALL)
            assert trio.current_time() - start >= 0.25
    failure(
        response, "brokerd did not answer within 0.25 s ([tools] call_timeout_s)", *MAY_HAVE_RUN
    )
    assert fake.requests == [p.CallFrame(CALL)]  # it was sent: it may have run


@pytest.mark.parametrize(
    ("script", "phrases"),
    [
        (send(b"not json\n"), ("brokerd answered what is not a frame", *MAY_HAVE_RUN)),
        (send(b'{"kind": "turn_done", "final": true, "body": {}}\n'),
         ("brokerd answered what is not a frame", *MAY_HAVE_RUN)),
        (answer(p.ToolsFrame(())),
         ("brokerd answered ToolsFrame, not an answer to its request", *MAY_HAVE_RUN)),
        (send(b'{"kind": "response", "final": true, "bo'),  # then it closes
         ("the stream ended in the middle of a frame", *MAY_HAVE_RUN)),
        (close_at_once, ("brokerd closed the connection without an answer",
                         "the call's outcome is unknown: check before calling it again")),
        (answer(p.WireError(p.ErrorCode.BAD_FRAME, "no")),
         ("brokerd refused the call (bad_frame: no); it was not run",)),
    ],
    ids=["not-json", "a-loop-sock-frame", "wrong-kind", "half-a-frame", "closed", "refused"],
)  # fmt: skip
async def test_a_bad_answer_is_a_failed_response_saying_what_came(
    path: Path, script: Script, phrases: tuple[str, ...]
) -> None:
    async with fake_brokerd(path, script) as fake:
        with deadline(5, "the port's answer"):
            response = await BrokerPort(path, call_timeout=30).call(CALL)
    failure(response, *phrases)
    assert fake.requests == [p.CallFrame(CALL)]


async def test_an_answer_over_a_mebibyte_is_refused_not_buffered_for_ever(path: Path) -> None:
    sent = 0

    async def flood(stream: trio.SocketStream) -> None:
        nonlocal sent
        chunk = b"x" * 65536
        while True:  # no newline, ever
            await stream.send_all(chunk)
            sent += len(chunk)

    async with fake_brokerd(path, flood):
        with deadline(10, "the port refusing an endless answer"):
            response = await BrokerPort(path, call_timeout=30).call(CALL)
    failure(response, f"a frame is over the {MAX_FRAME}-byte limit", *MAY_HAVE_RUN)
    assert MAX_FRAME < sent < 4 * MAX_FRAME  # it stopped reading soon after the limit


async def test_list_tools_raises_broker_down_saying_whether_it_was_sent(path: Path) -> None:
    port = BrokerPort(path, call_timeout=30)
    with deadline(5, "list_tools"):
        with pytest.raises(BrokerDown, match="brokerd is not running") as down:
            await port.list_tools()
        assert not down.value.sent
        async with fake_brokerd(path, answer(p.ResponseFrame(result("?")))):
            with pytest.raises(
                BrokerDown, match="brokerd answered ResponseFrame, not an answer to its request"
            ) as odd:
                await port.list_tools()
        assert odd.value.sent


# --- brokerd restarted --------------------------------------------------------------------------


async def test_the_port_reconnects_by_itself_after_brokerd_restarts(path: Path) -> None:
    port = BrokerPort(path, call_timeout=30)
    with deadline(10, "calls across a restart of brokerd"):
        async with fake_brokerd(path, answer(p.ResponseFrame(result("first brokerd")))):
            assert await port.call(CALL) == result("first brokerd")
        failure(await port.call(CALL), "brokerd is not running", *NOT_SENT)  # while it is down
        async with fake_brokerd(path, answer(p.ResponseFrame(result("second brokerd")))) as fake:
            assert await port.call(CALL) == result("second brokerd")
            assert await port.approve(S1, "a-1", p.Answer.ONCE) == result("second brokerd")
    assert fake.requests == [p.CallFrame(CALL), p.ApproveFrame(S1, "a-1", p.Answer.ONCE)]
