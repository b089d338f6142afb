"""The channel on loop.sock: frames in and out of a real Daemon, over memory streams."""

from __future__ import annotations

import json
import os
import random
import resource
import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.channel import END, NEED_DATA, BadFrame, FrameDecoder, encode_frame
from boxmaker.client import Channel, ChannelError, open_channel
from boxmaker.clock import TickingClock
from boxmaker.layout import INDEX as INDEX_FILE
from boxmaker.loopd.infer import Client
from boxmaker.loopd.serve import ChannelServer, handle_connection
from boxmaker.loopd.service import Daemon, session_cache_size
from boxmaker.serving.listener import AlreadyServing, open_unix_listener
from boxmaker.session import INTERRUPTED, UNKNOWN_OUTCOME
from boxmaker.store import FileSystem, Store
from boxmaker.testing import FakeTools
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply, Timing

from ..helpers import BrokenPipe, FullDisk, NoMemory, deadline, make_config

S1 = p.SessionId("s1")
ECHO_X = '{"name": "echo", "arguments": {"text": "x"}}'


@asynccontextmanager
async def open_daemon(
    home: Path, fake: FakeLlamaServer, config_text: str = "", port: Any = None, cache_size: int = 64
) -> AsyncIterator[Daemon]:
    (home / "system.md").parent.mkdir(parents=True, exist_ok=True)
    (home / "system.md").write_text("You are Boxmaker, in a test.\n")
    config = make_config(f'[baseline]\nsystem = "{home}/system.md"\n{config_text}', home)
    clock = TickingClock()
    async with Client(config, transport=fake.mock_transport(), rng=random.Random(0)) as client:
        daemon = Daemon(config, client, port or FakeTools(clock), clock,
                        store=Store(home, clock), cache_size=cache_size)  # fmt: skip
        try:
            yield daemon
        finally:
            daemon.close()


class Peer:
    """The channel's end of one connection."""

    def __init__(self, stream: trio.testing.MemoryStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()
        self.frames: list[p.Frame] = []

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def next(self) -> p.Frame | None:
        while True:
            frame = self.decoder.next_frame()
            if frame is END:
                return None
            if frame is not NEED_DATA:
                self.frames.append(frame)  # type: ignore[arg-type]
                return frame  # type: ignore[return-value]
            self.decoder.receive_data(await self.stream.receive_some())

    async def until_final(self) -> list[p.Frame]:
        while (frame := await self.next()) is not None:
            if not isinstance(frame, BadFrame) and p.frame_is_final(frame):
                break
        return self.frames

    def events(self) -> list[p.TurnEvent]:
        return [f.event for f in self.frames if isinstance(f, p.TurnEventFrame)]


@asynccontextmanager
async def connect(daemon: Daemon, timeout: float = 30.0) -> AsyncIterator[Peer]:
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(handle_connection, server, daemon, timeout)
        yield Peer(client)


def turn(session: p.SessionId = S1, content: str = "Hi.", resume: bool = False, **kw: Any) -> bytes:
    return encode_frame(p.TurnFrame(session=session, content=content, resume=resume, **kw))


async def one_turn(daemon: Daemon, data: bytes) -> list[p.Frame]:
    async with connect(daemon) as peer:
        await peer.send(data)
        return await peer.until_final()


# --- frames, kinds and order -------------------------------------------------------------------


async def test_a_turn_streams_events_in_order_then_one_final_frame(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(reasoning="Let me see.", content="Hello, you.")])
    async with open_daemon(tmp_path, fake) as daemon:
        frames = await one_turn(daemon, turn())
    *events, done = frames
    assert all(isinstance(f, p.TurnEventFrame) for f in events)
    assert isinstance(done, p.TurnDoneFrame)
    assert [json.loads(encode_frame(f))["final"] for f in frames] == [False] * len(events) + [True]
    kinds = [type(f.event).__name__ for f in events]  # type: ignore[attr-defined]
    assert kinds == ["Progress"] * 2 + ["Reasoning"] * 4 + ["Content"] * 4
    texts = "".join(f.event.text for f in events if isinstance(f.event, p.Content))  # type: ignore[attr-defined]
    assert texts == done.content == "Hello, you."
    assert done.usage.predicted_n > 0


async def test_every_event_type_reaches_the_channel(tmp_path: Path) -> None:
    # The real clock: session files are written in worker threads, and a mock clock would
    # jump to the held request's timeout while one runs. Only a retry's backoff (under half a
    # second) takes time here; nothing depends on it.
    thought = " ".join(f"t{i}" for i in range(20))
    fake = FakeLlamaServer(script=[
        Reply(content="One."),
        Fault(FaultKind.CUT, after=3),
        Reply(reasoning=thought, tool_calls=(("call_tool", ECHO_X),)),
        Reply(content="Two."),
        Reply(content="Three."),
    ])  # fmt: skip
    async with open_daemon(tmp_path, fake, "[inference]\nthinking_cap = 5\n") as daemon:
        await one_turn(daemon, turn())
        fake.forget(0)
        fake.hold(0)
        async with connect(daemon) as peer:
            await peer.send(turn(resume=True, content="Second."))
            frame = await peer.next()
            assert isinstance(frame, p.TurnEventFrame)
            assert frame.event == p.Waiting(slot_busy=0)
            async with connect(daemon) as queued:
                await queued.send(turn(p.SessionId("s2"), "Other."))
                assert await queued.next() == p.TurnEventFrame(p.Queued(ahead=1))
                fake.release(0)
                await peer.until_final()
                await queued.until_final()
    seen = {type(e) for e in peer.events() + queued.events()}
    assert seen == {
        p.Waiting, p.Queued, p.Progress, p.Reasoning, p.Content, p.ToolCallStarted,
        p.ToolResult, p.ThinkingCapped, p.Retrying, p.CacheLoss,
    }  # fmt: skip


# --- error codes ---------------------------------------------------------------------------------


async def error_of(frames: list[p.Frame]) -> p.WireError:
    final = frames[-1]
    assert isinstance(final, p.WireError), final
    return final


@pytest.mark.parametrize(
    ("script", "config", "code", "says"),
    [
        ([Fault(FaultKind.CONTEXT_FULL)], "", p.ErrorCode.SESSION_FULL, "cannot fit"),
        ([Fault(FaultKind.SERVER_ERROR)], "", p.ErrorCode.INFERENCE, "answered 500"),
        (
            [Reply(tool_calls=(("clock", "{}"),))] * 3,
            "[loop]\ntool_iterations = 1\n",
            p.ErrorCode.TURN_LIMIT,
            "the turn was stopped",
        ),
    ],
)
async def test_turn_failures_have_their_codes(
    tmp_path: Path, script: list[Reply | Fault], config: str, code: p.ErrorCode, says: str
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(script=script), config) as daemon:
        error = await error_of(await one_turn(daemon, turn()))
    assert error.code is code
    assert says in error.message


async def test_session_codes(tmp_path: Path) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        missing = await error_of(await one_turn(daemon, turn(resume=True)))
        assert missing.code is p.ErrorCode.NO_SUCH_SESSION
        assert "send the turn with resume: false" in missing.message
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)
        exists = await error_of(await one_turn(daemon, turn()))
        assert exists.code is p.ErrorCode.SESSION_EXISTS
        daemon.close()  # the session is not in memory: it is read from disk
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)


async def test_a_storage_failure_is_internal_naming_the_file_and_loopd_goes_on(
    tmp_path: Path,
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        assert isinstance((await one_turn(daemon, turn())), list)
        daemon.store.fs = FullDisk()
        daemon.close()  # the session is read again, onto the full disk
        error = await error_of(await one_turn(daemon, turn(resume=True)))
        assert error.code is p.ErrorCode.INTERNAL
        assert str(tmp_path / "sessions" / "s1" / "0.jsonl") in error.message
        daemon.store.fs = FileSystem()
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"hello\n", "not JSON"),
        (
            b'{"kind":"turn","final":false,"body":{"session":"a/b","content":"x","resume":false}}\n',
            "'/'",
        ),
        (
            encode_frame(p.TurnDoneFrame("x", p.Usage(0, 0, 0, 0, False))),
            "'turn_done' frame is sent by loopd",
        ),
        (b"x" * (1024 * 1024 + 1), "over the 1048576-byte limit"),
    ],
)
async def test_a_bad_frame_gets_bad_frame_and_loopd_serves_the_next(
    tmp_path: Path, data: bytes, says: str
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        async with connect(daemon) as peer:
            await peer.send(data)
            frames = await peer.until_final()
        error = await error_of(frames)
        assert error.code is p.ErrorCode.BAD_FRAME
        assert says in error.message
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)


async def test_a_frame_sent_a_byte_at_a_time_works(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon, connect(daemon) as peer:
        for byte in turn():
            await peer.send(bytes([byte]))
        frames = await peer.until_final()
    assert isinstance(frames[-1], p.TurnDoneFrame)


async def test_a_client_that_says_nothing_is_told_and_dropped(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer()) as daemon, connect(daemon) as peer:
        error = await error_of(await peer.until_final())
        assert await peer.next() is None  # and the connection is closed
    assert error.message == "no frame within 30 s of connecting"
    assert trio.current_time() == pytest.approx(30.0)


async def test_a_turn_that_asks_not_to_queue_on_a_busy_session_is_session_busy_at_once(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as first:
            await first.send(turn())
            assert await first.next() == p.TurnEventFrame(p.Waiting(slot_busy=0))
            busy = await error_of(await one_turn(daemon, turn(resume=True, queue=False)))
            assert busy.code is p.ErrorCode.SESSION_BUSY
            assert "s1 is already in a turn" in busy.message
            fake.release(0)
            assert isinstance((await first.until_final())[-1], p.TurnDoneFrame)
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)


def test_the_session_cache_leaves_most_file_descriptors_free() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, hard))
        assert session_cache_size() == 12
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
        assert session_cache_size() == 64
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_session_in_a_turn_is_never_closed_to_make_room_in_the_cache(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake, cache_size=1) as daemon:
        fake.hold(0)
        async with connect(daemon) as first, connect(daemon) as second:
            await first.send(turn(S1))
            assert await first.next() == p.TurnEventFrame(p.Waiting(slot_busy=0))
            await second.send(turn(p.SessionId("s2")))
            assert await second.next() == p.TurnEventFrame(p.Queued(ahead=1))
            fake.release(0)
            assert isinstance((await first.until_final())[-1], p.TurnDoneFrame)
            assert isinstance((await second.until_final())[-1], p.TurnDoneFrame)
        for session in (S1, p.SessionId("s2")):  # evicted once idle, resumed from disk
            done = await one_turn(daemon, turn(session, resume=True))
            assert isinstance(done[-1], p.TurnDoneFrame)


# --- a channel that leaves cancels its turn -----------------------------------------------------


def kinds(daemon: Daemon, session: p.SessionId = S1) -> list[str]:
    path = daemon.store.folder(session) / "0.jsonl"
    return [json.loads(line)["type"] for line in path.read_text().splitlines()]


async def test_leaving_while_queued_at_the_gate_cancels_the_turn(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as holder:
            await holder.send(turn(p.SessionId("s0")))
            await holder.next()  # waiting: s0 holds the gate
            with deadline(10, "the queued turn's end after its channel left"):
                async with connect(daemon) as leaver:
                    await leaver.send(turn())
                    assert await leaver.next() == p.TurnEventFrame(p.Queued(ahead=1))
                    await leaver.stream.aclose()
            await trio.testing.wait_all_tasks_blocked()
            assert not daemon.busy(S1)
            fake.release(0)
            await holder.until_final()
        assert kinds(daemon) == ["session_start", "user", "turn_end"]  # cancelled
        assert len(fake.requests[0]) == 1  # only s0's request reached the server
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)


async def test_leaving_mid_stream_closes_the_server_stream_and_appends_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(
        script=[Reply(content="one two three four five six seven"), Reply(content="Again.")],
        timing=Timing(ms_per_token=100.0),
    )
    async with open_daemon(tmp_path, fake) as daemon:
        async with connect(daemon) as peer:
            await peer.send(turn())
            while not [e for e in peer.events() if isinstance(e, p.Content)]:
                await peer.next()
            await peer.stream.aclose()
        await fake.wait_for_disconnects(1)
        assert kinds(daemon) == ["session_start", "user", "turn_end"]  # cancelled
        frames = await one_turn(daemon, turn(resume=True, content="Again?"))
        assert frames[-1] == p.TurnDoneFrame("Again.", frames[-1].usage)  # type: ignore[union-attr]


async def test_leaving_while_nothing_is_written_is_noticed_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """During prompt processing loopd writes nothing for a long while (here 64 tokens at 100 ms
    each between two progress events): only the watch on the channel's end of file can see
    the channel leave, and it cancels the turn at once, not at the next write."""
    fake = FakeLlamaServer(
        script=[Reply(content="Too late."), Reply(content="Again.")],
        timing=Timing(batch_size=64, prompt_ms_per_token=100.0),
    )
    async with open_daemon(tmp_path, fake) as daemon:
        async with connect(daemon) as peer:
            await peer.send(turn())
            while not [e for e in peer.events() if isinstance(e, p.Progress)]:
                await peer.next()
            left = trio.current_time()
            await peer.stream.aclose()
            with deadline(1, "the server stream's close after the channel left"):
                await fake.wait_for_disconnects(1)
        assert trio.current_time() - left < 1
        assert kinds(daemon) == ["session_start", "user", "turn_end"]  # cancelled
        frames = await one_turn(daemon, turn(resume=True, content="Again?"))
        assert frames[-1] == p.TurnDoneFrame("Again.", frames[-1].usage)  # type: ignore[union-attr]


async def test_a_channel_that_breaks_while_frames_are_written_is_not_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Nobody reads this."))
    async with open_daemon(tmp_path, fake) as daemon:
        await handle_connection(BrokenPipe(turn()), daemon)
        assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)


class BlockingTools(NoMemory):
    def __init__(self) -> None:
        self.started = trio.Event()

    async def call(self, request: p.ToolRequest) -> p.ToolResponse:
        self.started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_leaving_while_a_tool_runs_cancels_it_and_closes_its_call(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=(("clock", "{}"),))], default=Reply(content="ok")
    )
    tools = BlockingTools()
    async with open_daemon(tmp_path, fake, port=tools) as daemon:
        with deadline(10, "the turn's end after the channel left while the tool ran"):
            async with connect(daemon) as peer:
                await peer.send(turn())
                await tools.started.wait()
                await peer.stream.aclose()
        await trio.testing.wait_all_tasks_blocked()
        # The call left without a result is closed by the cancelled turn itself: it was sent,
        # so its outcome is unknown (never "not run").
        assert kinds(daemon) == [
            "session_start", "user", "assistant", "usage", "call_sent", "tool_result", "turn_end",
        ]  # fmt: skip
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)
        log = daemon.store.folder(S1).joinpath("0.jsonl").read_text()
        assert (log.count(UNKNOWN_OUTCOME), log.count(INTERRUPTED)) == (1, 0)


# --- the socket ----------------------------------------------------------------------------------


async def test_the_socket_is_0600_in_a_0700_folder_and_a_live_one_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run" / "loop" / "loop.sock"
    listener = await open_unix_listener(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with pytest.raises(AlreadyServing, match=rf"another loopd \(pid {os.getpid()}\) is already"):
        await open_unix_listener(path)
    await listener.aclose()
    assert not path.exists()  # it was this listener's: removed
    with socket.socket(socket.AF_UNIX) as killed:  # what a loopd killed with SIGKILL leaves
        killed.bind(str(path))
    assert path.exists()
    again = await open_unix_listener(path)  # a stale file with no listener: replaced
    await again.aclose()


async def test_something_else_listening_on_the_path_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "loop.sock"
    with socket.socket(socket.AF_UNIX) as other:
        other.bind(str(path))
        other.listen()
        with pytest.raises(AlreadyServing, match="another process is already listening on"):
            await open_unix_listener(path)
        assert path.exists()


async def test_over_a_real_socket_with_the_channel_client(tmp_path: Path) -> None:
    path = tmp_path / "loop.sock"
    async with open_daemon(
        tmp_path, FakeLlamaServer(default=Reply(content="Over the socket."))
    ) as daemon:
        server = ChannelServer(daemon)
        async with trio.open_nursery() as nursery:
            listener = await open_unix_listener(path)
            await nursery.start(server.serve, listener)
            async with await open_channel(path) as channel:
                await channel.send(p.TurnFrame(S1, "Hi.", resume=False))
                while not isinstance(frame := await channel.receive(), p.TurnDoneFrame):
                    assert isinstance(frame, p.TurnEventFrame)
            assert frame.content == "Over the socket."
            server.stop(grace=5)
    assert not path.exists()  # removed once no longer listening


async def test_the_channel_client_says_so_when_loopd_is_gone_before_the_turn_is_sent() -> None:
    """The kill test found this: loopd killed between connect and send gave a bare
    BrokenResourceError instead of the channel's one error type."""
    ours, theirs = trio.socket.socketpair()
    theirs.close()  # loopd is gone
    channel = Channel(trio.SocketStream(ours), Path("loop.sock"))
    with pytest.raises(ChannelError, match="the connection to loopd broke"):
        await channel.send(p.TurnFrame(S1, "Hi.", resume=False))
    await channel.aclose()


async def test_a_log_whose_last_write_was_cut_short_goes_on_and_loopd_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)
        daemon.close()  # as after a kill: the next turn reads the disk
        log = daemon.store.folder(S1) / "0.jsonl"
        whole = log.stat().st_size
        with log.open("ab") as out:
            out.write(b'{"type":"user","time":"2026-11-29T21:')
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)
    aside = log.with_name(f"0.jsonl.torn-{whole}")
    assert aside.read_bytes() == b'{"type":"user","time":"2026-11-29T21:'
    assert f"s1: its last write was cut short (loopd stopped mid-write, or the power went); " \
           f"its 37 bytes are kept in {aside}" in caplog.text  # fmt: skip
    assert kinds(daemon)[1:] == ["user", "assistant", "usage", "turn_end"] * 2


async def test_a_resume_or_create_guess_is_logged_at_debug_and_a_turn_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="loopd")
    fake = FakeLlamaServer(default=Reply(content="Hi."))
    async with open_daemon(tmp_path, fake) as daemon:
        guessed = await one_turn(daemon, turn(resume=True))  # bxctl's guess for a new name
        assert guessed[-1].code is p.ErrorCode.NO_SUCH_SESSION  # type: ignore[union-attr]
        await one_turn(daemon, turn(resume=False))
        await one_turn(daemon, turn(resume=False))  # and the other way round
    levels = [(r.levelname, r.getMessage().split(" in ")[0]) for r in caplog.records
              if r.getMessage().startswith("turn s1: ") and " in " in r.getMessage()]  # fmt: skip
    assert levels == [
        ("DEBUG", "turn s1: no_such_session"),
        ("INFO", "turn s1: done"),
        ("DEBUG", "turn s1: session_exists"),
    ]


# --- the turn's index: after its answer, before loopd closes ------------------------------------


class SentStream(trio.abc.Stream):
    """loopd's end of a connection, keeping every byte loopd sent."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner, self.sent = inner, b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.sent += bytes(data)
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


class IndexTimeline(FileSystem):
    """Notes, for each `index.json` written, whether loopd had sent `turn_done` by then."""

    def __init__(self, stream: SentStream, fail: bool = False) -> None:
        self.stream, self.fail, self.written = stream, fail, []  # type: ignore[var-annotated]

    def replace_file(self, path: Path, data: bytes, **options: Any) -> None:
        if path.name == INDEX_FILE:
            self.written.append(b'"kind":"turn_done"' in self.stream.sent)
            if self.fail:
                raise OSError(28, "No space left on device")
        super().replace_file(path, data, **options)


@pytest.mark.parametrize("fail", [False, True], ids=["written", "failing"])
async def test_the_index_is_written_after_turn_done_and_before_loopd_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fail: bool
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Indexed."))
    client, server = trio.testing.memory_stream_pair()
    sent = SentStream(server)
    async with open_daemon(tmp_path, fake) as daemon:
        daemon.store.fs = timeline = IndexTimeline(sent, fail)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle_connection, sent, daemon, 30.0)
            channel = Peer(client)
            await channel.send(turn())
            frames = await channel.until_final()
            assert isinstance(frames[-1], p.TurnDoneFrame)  # the answer: the log is durable
            assert await channel.next() is None  # loopd closed: the index was written first
            assert timeline.written == [True]  # once, after turn_done went out
        index = tmp_path / "sessions" / "s1" / INDEX_FILE
    if fail:  # a warning: the answer stands, and the log outranks the index
        assert "No space left on device" in caplog.text
        assert not index.exists()
    else:
        assert json.loads(index.read_text())["turns"] == 1
