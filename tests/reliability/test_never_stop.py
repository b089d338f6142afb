"""Peers and servers that never stop: what loopd takes from a server and gives to a
channel is bounded in bytes and in time, and no JSON, however deep, takes a turn down."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.channel import MAX_FRAME, encode_frame
from boxmaker.loopd.infer import Client, Http, ProtocolError, Timeout
from boxmaker.loopd.serve import handle_connection
from boxmaker.testing.fake_server import FakeLlamaServer, Reply, Timing

from ..daemon.test_service import connect, error_of, kinds, one_turn, open_daemon, turn
from ..helpers import EventLog, deadline, make_config
from ..hostile import KIB, MIB, Hostile, answer, endless, ticking

REQUEST = p.ChatRequest(
    slot="main",
    messages=(p.SystemMessage(content="You are Boxmaker."), p.UserMessage(content="Hi.")),
    tools=(),
)


def client_for(server: Hostile | FakeLlamaServer, config_text: str = "") -> Client:
    transport = server.mock_transport()
    return Client(make_config(config_text), transport=transport, rng=random.Random(0))


# --- what the server sends --------------------------------------------------------------------


async def test_an_error_body_is_read_up_to_64_kib_and_no_further() -> None:
    hostile = Hostile(endless(16 * MIB), status=500)  # the was 300 MB
    async with client_for(hostile) as client:
        with pytest.raises(Http) as caught:
            await client.chat_with_retry(REQUEST, EventLog())
    assert caught.value.status == 500
    assert caught.value.body.endswith(" … (cut at 65536 bytes)")
    assert len(caught.value.body) < 65 * KIB
    assert hostile.pulled <= 3  # parts of 64 KiB: of 256


async def test_a_health_answer_is_read_up_to_64_kib_and_no_further() -> None:
    hostile = Hostile(answer("ok"), health=endless(16 * MIB))
    async with client_for(hostile) as client:
        with pytest.raises(Http) as caught:
            await client.health()
    assert caught.value.body.endswith(" … (cut at 65536 bytes)")
    assert hostile.pulled <= 3


async def test_an_sse_line_without_its_end_is_a_protocol_error_past_4_mib() -> None:
    hostile = Hostile(endless(16 * MIB))
    async with client_for(hostile) as client:
        with pytest.raises(ProtocolError, match=r"a line is over the 4194304-byte limit"):
            await client.chat_with_retry(REQUEST, EventLog())
    assert hostile.pulled <= 4 * MIB // (64 * KIB) + 2
    assert hostile.requests == 1  # not retried: the server's bytes are wrong, not late


@pytest.mark.parametrize(
    "chunk",
    [lambda w: w.content("more "), lambda _w: b":\n\n"],
    ids=["deltas", "pings"],
)
async def test_a_stream_that_never_ends_stops_at_the_completion_timeout(
    autojump_clock: trio.testing.MockClock, chunk: object
) -> None:
    """One chunk a second keeps the idle timeout from ever firing; the wall-clock cap per
    completion (`[inference] completion_timeout_s`, 1800 s by default) ends it."""
    hostile = Hostile(ticking(1.0, chunk))  # type: ignore[arg-type]
    async with client_for(hostile) as client:
        with deadline(4000, "the end of an endless stream"), pytest.raises(Timeout) as caught:
            await client.chat_with_retry(REQUEST, EventLog())
    assert caught.value.phase == "completion"
    assert str(caught.value) == "timed out (completion): the completion did not end within 1800 s"
    assert trio.current_time() == pytest.approx(1800.0)
    assert hostile.requests == 1  # not retried: it would run as long again
    assert hostile.disconnects == 1  # the stream was closed


async def test_max_tokens_is_always_sent() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")])
    async with client_for(fake) as client:  # an empty config
        await client.chat(REQUEST, EventLog())
    assert fake.requests[0][0]["max_tokens"] == 16384


# --- JSON nested a thousand deep --------------------------------------------------------------

DEEP = "[" * 1000 + "]" * 1000


async def test_a_frame_nested_a_thousand_deep_is_bad_frame(tmp_path: Path) -> None:
    data = (
        b'{"kind":"turn","final":false,"body":{"session":"s1","content":"x","resume":false,'
        b'"deep":' + DEEP.encode() + b"}}\n"
    )
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        error = await error_of(await one_turn(daemon, data))
        assert error.code is p.ErrorCode.BAD_FRAME
        assert "nested deeper than 100 levels" in error.message
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)


async def test_tool_arguments_nested_a_thousand_deep_are_a_failure_the_model_is_told(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=(("clock", DEEP),)), Reply(content="Sorry, once more.")]
    )
    async with open_daemon(tmp_path, fake) as daemon:
        done = (await one_turn(daemon, turn()))[-1]
    assert isinstance(done, p.TurnDoneFrame)
    assert done.content == "Sorry, once more."
    told = fake.requests[0][1]["messages"][-1]
    assert told["role"] == "tool"
    assert "The arguments of clock are not valid JSON" in told["content"]
    assert "nested deeper than 100 levels" in told["content"]


# --- a channel that does not read -------------------------------------------------------------
# Each test's first turn creates the session (its files are written in a worker thread, which a
# mock clock would let jump to the test's deadline); the turn under test resumes it from memory.


async def test_a_channel_that_does_not_read_is_dropped_and_its_turn_cancelled(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    words = " ".join(f"w{i}" for i in range(200))
    fake = FakeLlamaServer(
        script=[Reply(content="Hello."), Reply(content=words)], timing=Timing(ms_per_token=1000.0)
    )
    async with open_daemon(tmp_path, fake) as daemon:
        await one_turn(daemon, turn())
        started = trio.current_time()
        channel, loopd = trio.testing.lockstep_stream_pair()  # a send waits for a reader
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.send_all, turn(resume=True))
            with deadline(100, "the drop of a channel that reads nothing"):
                await handle_connection(loopd, daemon)
        assert trio.current_time() - started == pytest.approx(30.0, abs=1.0)  # write_timeout_s
        assert fake.disconnects == 1  # the turn was cancelled: its stream closed
        assert kinds(daemon).count("assistant") == 1  # the first turn's: none of this one
        assert not daemon.busy(p.SessionId("s1"))
    assert "the channel is not reading: it took nothing for 30 s; dropping it" in caplog.text


async def test_frames_waiting_for_a_channel_are_bounded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Megabytes arrive faster than the channel takes them: past 4 MiB waiting, it is dropped
    at once, not after the write timeout (the issue saw 33 MB queued per connection)."""
    hostile = Hostile(answer(*["x" * MIB] * 8), first=[answer("Hello.")])
    async with open_daemon(tmp_path, hostile) as daemon:  # type: ignore[arg-type]
        await one_turn(daemon, turn())
        started, pulled = trio.current_time(), hostile.pulled
        channel, loopd = trio.testing.lockstep_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.send_all, turn(resume=True))
            with deadline(100, "the drop of a channel that reads nothing"):
                await handle_connection(loopd, daemon)
        assert trio.current_time() - started < 1.0
        assert hostile.pulled - pulled <= 7  # of its 12 parts: about 5 MiB taken, then closed
        assert hostile.disconnects == 1
    assert "bytes of frames wait for it, more than 4194304; dropping it" in caplog.text


async def test_a_channel_that_reads_slowly_is_not_dropped(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A channel that takes a piece every 20 s (less than the write timeout) gets every
    frame: the timeout is for no progress at all, not for a slow reader."""
    hostile = Hostile(answer(*["y" * (200 * KIB)] * 4), first=[answer("Hello.")])
    async with open_daemon(tmp_path, hostile) as daemon:  # type: ignore[arg-type]
        await one_turn(daemon, turn())
        channel, loopd = trio.testing.lockstep_stream_pair()
        received = bytearray()

        async def read_slowly() -> None:
            await channel.send_all(turn(resume=True))
            while data := await channel.receive_some():
                received.extend(data)
                await trio.sleep(20)

        with deadline(10_000, "a slow channel's turn"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_slowly)
                await handle_connection(loopd, daemon)
    final = json.loads(received.splitlines()[-1])
    assert final["kind"] == "turn_done"
    assert final["body"]["content"] == "y" * (800 * KIB)


# --- text longer than a frame -----------------------------------------------------------------


async def test_a_content_delta_over_1_mib_goes_out_over_several_frames(tmp_path: Path) -> None:
    text = 'é"\x01' * 400_000  # 2 MB of UTF-8, more written as JSON
    hostile = Hostile(answer(text))
    async with open_daemon(tmp_path, hostile) as daemon, connect(daemon) as peer:  # type: ignore[arg-type]
        await peer.send(turn())
        frames = await peer.until_final()
    assert all(len(encode_frame(f)) <= MAX_FRAME + 1 for f in frames)
    pieces = [e.text for e in peer.events() if isinstance(e, p.Content)]
    assert len(pieces) >= 2
    assert "".join(pieces) == text
    *parts, done = [f for f in frames if isinstance(f, p.TurnDonePartFrame | p.TurnDoneFrame)]
    assert isinstance(done, p.TurnDoneFrame)
    assert parts
    assert "".join(f.content for f in [*parts, done]) == text  # type: ignore[union-attr]


async def test_an_answer_over_1_mib_in_small_deltas_ends_with_turn_done_parts(
    tmp_path: Path,
) -> None:
    deltas = ["word " * 1000] * 300  # 1.5 MB in deltas of 5 kB
    async with open_daemon(tmp_path, Hostile(answer(*deltas))) as daemon:  # type: ignore[arg-type]
        frames = await one_turn(daemon, turn())
    parts = [f.content for f in frames if isinstance(f, p.TurnDonePartFrame)]
    done = frames[-1]
    assert isinstance(done, p.TurnDoneFrame)
    assert len(parts) >= 1
    assert "".join([*parts, done.content]) == "".join(deltas)
    assert "assistant" in kinds(daemon)


# --- frames that are not one turn frame -------------------------------------------------------


async def test_a_key_named_twice_in_a_frame_is_bad_frame(tmp_path: Path) -> None:
    data = (
        b'{"kind":"turn","final":false,"body":{"session":"../../etc","session":"ok",'
        b'"content":"Hi.","resume":false}}\n'
    )
    async with open_daemon(tmp_path, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        error = await error_of(await one_turn(daemon, data))
    assert error.code is p.ErrorCode.BAD_FRAME
    assert error.message == "the key 'session' appears twice in one object"
    assert not (tmp_path / "sessions" / "ok").exists()


async def test_a_frame_after_the_turn_frame_is_bad_frame_and_the_turn_not_run(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        frames = await one_turn(daemon, turn() + turn(p.SessionId("s2")))
        error = await error_of(frames)
        assert frames == [error]
        assert error.code is p.ErrorCode.BAD_FRAME
        assert "more was sent after the turn frame" in error.message
        assert not fake.requests
        assert not (tmp_path / "sessions" / "s1").exists()


async def test_a_frame_sent_during_the_turn_cancels_it_with_bad_frame(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        fake.hold(0)
        async with connect(daemon) as peer:
            await peer.send(turn())
            assert await peer.next() == p.TurnEventFrame(p.Waiting(slot_busy=0))
            await peer.send(turn())
            error = await error_of(await peer.until_final())
        assert error.code is p.ErrorCode.BAD_FRAME
        assert "more was sent after the turn frame" in error.message
        assert "assistant" not in kinds(daemon)
        fake.release(0)
        assert not daemon.busy(p.SessionId("s1"))
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)
