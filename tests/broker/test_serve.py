"""brokerd's `broker.sock`, over a real socket: a request frame a connection, answered by one
final frame; whatever a peer sends that is not a request is `error bad_frame`, and brokerd
goes on serving the next connection. The real clock throughout: real sockets are in flight."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker import proto as p
from boxmaker.brokerd import Broker, BrokerServer, builtin_registry
from boxmaker.brokerd import serve as serve_module
from boxmaker.brokerd.policy.rules import parse_policy
from boxmaker.channel import END, MAX_FRAME, NEED_DATA, BadFrame, FrameDecoder, encode_frame
from boxmaker.clock import TickingClock
from boxmaker.serving.broker_port import BrokerPort
from boxmaker.serving.listener import open_unix_listener

from ..helpers import deadline

S1 = p.SessionId("s1")

POLICY = """\
[grants.read_file]
decision = "allow"

[grants.echo]
decision = "allow"

[grants.write_file]
decision = "ask"
"""


@attrs.frozen
class Served:
    socket: Path
    broker: Broker
    port: BrokerPort


def new_broker(tmp_path: Path) -> Broker:
    base = tmp_path.resolve()
    (base / "ws").mkdir()
    policy = parse_policy(POLICY, base / "policy.toml")
    return Broker(builtin_registry(), policy, base / "ws", base / "home", TickingClock())


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[Served]:
    """A brokerd serving `tmp_path/run/broker.sock`, and loopd's port to it."""
    broker = new_broker(tmp_path)
    path = tmp_path / "run" / "broker.sock"
    server = BrokerServer(broker)
    async with trio.open_nursery() as nursery:
        listener = await open_unix_listener(path, "brokerd")
        await nursery.start(server.serve, listener)
        yield Served(path, broker, BrokerPort(path, call_timeout=30.0))
        server.stop(grace=0)
    assert not path.exists()  # brokerd removes its socket when it stops


async def raw(path: Path, data: bytes, *, eof: bool = False) -> list[p.BrokerFrame | BadFrame]:
    """Send `data` on a new connection (then the end of the stream, if `eof`); every frame that
    comes back until brokerd closes the connection."""
    async with await trio.open_unix_socket(str(path)) as stream:
        await stream.send_all(data)
        if eof:
            await stream.send_eof()
        decoder = FrameDecoder(frames=p.BrokerFrame)
        frames: list[p.BrokerFrame | BadFrame] = []
        while (frame := decoder.next_frame()) is not END:
            if frame is NEED_DATA:
                decoder.receive_data(await stream.receive_some())
            else:
                frames.append(frame)
        return frames


def echo(text: str, call: int = 1) -> p.ToolRequest:
    return p.ToolRequest(S1, call, "echo", json.dumps({"text": text}))


def said(text: str) -> p.ResultResponse:
    return p.ResultResponse(text, p.DataClass.PUBLIC, untrusted=False, truncated=False)


async def test_list_tools_gives_the_listing(tmp_path: Path) -> None:
    with deadline(10, "the listing"):
        async with serving(tmp_path) as served:
            assert await served.port.list_tools() == served.broker.listing()
            frames = await raw(served.socket, encode_frame(p.ListToolsFrame()))
            assert frames == [served.broker.listing()]


async def test_a_call_and_its_approval_round_trip(tmp_path: Path) -> None:
    with deadline(10, "a call and its approval"):
        async with serving(tmp_path) as served:
            assert await served.port.call(echo("hello")) == said("hello")
            write = p.ToolRequest(S1, 2, "write_file", '{"path": "a.md", "content": "a"}')
            pending = await served.port.call(write)
            assert isinstance(pending, p.PendingApprovalResponse)
            assert pending.summary == "write_file a.md"
            assert not (tmp_path / "ws" / "a.md").exists()
            approved = await served.port.approve(S1, pending.id, p.Answer.ONCE)
            assert approved == p.ResultResponse(
                "Wrote 1 bytes to a.md (new file).", p.DataClass.PRIVATE, False, False
            )
            assert (tmp_path / "ws" / "a.md").read_text() == "a"
            assert await served.port.approve(S1, pending.id, p.Answer.ONCE) == p.FailedResponse(
                f"no call waits for an answer as {pending.id!r}; it was not run"
            )


READ = p.ToolRequest(S1, 1, "read_file", '{"path": "a.md"}')


@pytest.mark.parametrize(
    ("data", "eof", "reason"),
    [
        (b"not json\n", False, None),
        (b"\n", False, "an empty line is not a frame"),
        (b'{"kind": "shutdown", "final": false, "body": {}}\n', False, None),
        (b'{"kind": "call", "final": false, "body": {}}\n', False, None),
        (encode_frame(p.ToolsFrame(())), False, "a 'tools' frame is sent by brokerd, not to it"),
        (encode_frame(p.ResponseFrame(said("x"))), False,
         "a 'response' frame is sent by brokerd, not to it"),
        (encode_frame(p.WireError(p.ErrorCode.INTERNAL, "x")), False,
         "a 'error' frame is sent by brokerd, not to it"),
        (encode_frame(p.CallFrame(READ)) * 2, False,
         "more was sent after the request frame; a connection carries one"),
        (encode_frame(p.CallFrame(READ))[:-1], True,
         "the stream ended in the middle of a frame (no newline)"),
        (b"x" * (MAX_FRAME + 1), False, f"a frame is over the {MAX_FRAME}-byte limit"),
    ],
    ids=["not-json", "empty-line", "unknown-kind", "bad-body", "tools", "response", "error",
         "two-frames", "no-newline", "over-1-MiB"],
)  # fmt: skip
async def test_a_bad_frame_is_answered_bad_frame_and_the_next_connection_is_served(
    tmp_path: Path, data: bytes, eof: bool, reason: str | None
) -> None:
    with deadline(10, "brokerd's answer to a bad frame"):
        async with serving(tmp_path) as served:
            (tmp_path / "ws" / "a.md").write_text("a\n")
            frames = await raw(served.socket, data, eof=eof)
            assert len(frames) == 1  # one final frame, then brokerd closes
            [error] = frames
            assert isinstance(error, p.WireError)
            assert error.code is p.ErrorCode.BAD_FRAME
            if reason is not None:
                assert error.message == reason
            assert served.broker.calls == 0  # nothing ran
            assert await served.port.call(echo("next")) == said("next")


async def test_a_peer_that_leaves_without_a_word_gets_none_and_brokerd_goes_on(
    tmp_path: Path,
) -> None:
    with deadline(10, "a call after a peer left at once"):
        async with serving(tmp_path) as served:
            assert await raw(served.socket, b"", eof=True) == []
            assert await served.port.call(echo("next")) == said("next")


@pytest.mark.parametrize("data", [b"", b'{"kind": "call", '], ids=["silent", "half-a-frame"])
async def test_a_peer_that_sends_no_frame_is_closed_after_the_first_frame_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes
) -> None:
    monkeypatch.setattr(serve_module, "FIRST_FRAME_TIMEOUT_S", 0.25)
    with deadline(10, "brokerd closing on a quiet peer"):
        async with serving(tmp_path) as served:
            start = trio.current_time()
            frames = await raw(served.socket, data)
            assert trio.current_time() - start >= 0.25
            assert frames == [
                p.WireError(p.ErrorCode.BAD_FRAME, "no frame within 0.25 s of connecting")
            ]
            assert await served.port.call(echo("next")) == said("next")


async def test_many_connections_at_once_are_all_answered(tmp_path: Path) -> None:
    answers: dict[int, p.ToolResponse] = {}
    with deadline(10, "20 calls at once"):
        async with serving(tmp_path) as served:

            async def one(n: int) -> None:
                answers[n] = await served.port.call(echo(f"call {n}", n))

            async with trio.open_nursery() as nursery:
                for n in range(20):
                    nursery.start_soon(one, n)
    assert answers == {n: said(f"call {n}") for n in range(20)}


async def test_quiet_peers_do_not_hold_up_another(tmp_path: Path) -> None:
    with deadline(10, "a call while 20 peers say nothing"):
        async with serving(tmp_path) as served:
            quiet = [await trio.open_unix_socket(str(served.socket)) for _ in range(20)]
            assert await served.port.call(echo("through")) == said("through")
            for stream in quiet:
                await stream.aclose()


async def test_a_peer_that_goes_away_before_the_answer_costs_brokerd_nothing(
    tmp_path: Path,
) -> None:
    with deadline(10, "a call after a peer left"):
        async with serving(tmp_path) as served:
            with socket.socket(socket.AF_UNIX) as gone:
                gone.connect(str(served.socket))
                gone.sendall(encode_frame(p.CallFrame(echo("never read"))))
            assert await served.port.call(echo("next")) == said("next")


async def test_bxctl_rm_tells_brokerd_and_the_sessions_grants_end(tmp_path: Path) -> None:
    from boxmaker.cli import bxctl
    from boxmaker.cli.sessions import Output, run_command
    from boxmaker.session import assemble_baseline
    from boxmaker.store import Store

    home = tmp_path.resolve() / "home"  # noqa: ASYNC240 (before anything runs)
    made = Store(home, TickingClock()).create(S1, assemble_baseline("A test.\n", None), "main")
    made.close()
    with deadline(10, "bxctl rm and brokerd"):
        async with serving(tmp_path) as served:
            write = p.ToolRequest(S1, 1, "write_file", '{"path": "a.md", "content": "a"}',
                                  identity=made.identity)  # fmt: skip
            pending = await served.port.call(write)
            assert isinstance(pending, p.PendingApprovalResponse)
            await served.port.approve(S1, pending.id, p.Answer.SESSION)
            grants = home / "broker" / "grants" / "s1.json"
            assert grants.exists()
            args = bxctl.build_parser().parse_args(
                ["rm", "s1", "--yes", "--home", str(home), "--socket", str(served.socket)]
            )
            out = Output(io.StringIO(), io.StringIO())
            status = await trio.to_thread.run_sync(run_command, args, {}, out, io.StringIO())
            assert (status, out.err.getvalue()) == (0, "")  # type: ignore[attr-defined]
            assert not grants.exists()
            again = await served.port.call(attrs.evolve(write, call=2))
            assert isinstance(again, p.PendingApprovalResponse)  # asked: the grant ended


async def test_bxctl_rm_says_so_when_brokerd_cannot_be_told(tmp_path: Path) -> None:
    from boxmaker.cli import bxctl
    from boxmaker.cli.sessions import Output, run_command
    from boxmaker.session import assemble_baseline
    from boxmaker.store import Store

    home = tmp_path / "home"
    Store(home, TickingClock()).create(S1, assemble_baseline("A test.\n", None), "main").close()
    args = bxctl.build_parser().parse_args(["rm", "s1", "--yes", "--home", str(home)])
    out = Output(io.StringIO(), io.StringIO())
    with deadline(10, "bxctl rm"):
        status = await trio.to_thread.run_sync(run_command, args, {}, out, io.StringIO())
    assert status == 0  # removed all the same
    assert not (home / "sessions" / "s1").exists()
    said = out.err.getvalue()  # type: ignore[attr-defined]
    assert said.startswith("note: brokerd was not told (")
    assert "holds for the removed session alone" in said
