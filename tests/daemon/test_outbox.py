"""A channel's outbox on a real socket: a frame that finds nothing waiting is written at once,
without the writer task; frames of one burst wait for the writer and go out whole and in
order; a frame the socket cannot take whole is finished by the writer, and nothing overtakes
what the writer still sends; a channel gone fails no frame put for it; and a closed socket's
number, which the system gives the next file opened, is never written to."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.channel import LoopdConnection, encode_frame
from boxmaker.loopd.outbox import CORK_S, Outbox

from ..helpers import deadline

S1 = p.SessionId("s-1")


def turn_connection() -> LoopdConnection:
    """A connection that read a turn frame: it may send the turn's events."""
    connection = LoopdConnection()
    connection.receive_data(encode_frame(p.TurnFrame(S1, "Hello.", resume=False)))
    assert isinstance(connection.next_event(), p.TurnFrame)
    return connection


def content(text: str) -> p.TurnEventFrame:
    return p.TurnEventFrame(p.Content(text))


def encoded(*frames: p.Frame) -> bytes:
    return b"".join(encode_frame(f) for f in frames)


async def receive_exactly(stream: trio.SocketStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += await stream.receive_some()
    return data


@asynccontextmanager
async def outbox_pair() -> AsyncIterator[tuple[Outbox, trio.SocketStream]]:
    """An outbox on one end of a socket pair (its writer not started), and the other end."""
    ours, theirs = trio.socket.socketpair()
    async with trio.SocketStream(ours) as mine, trio.SocketStream(theirs) as peer:
        yield Outbox(mine, turn_connection(), 30.0, trio.CancelScope(), "test"), peer


async def test_a_frame_that_finds_nothing_waiting_is_written_without_the_writer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with outbox_pair() as (outbox, peer):
        outbox.event(p.Content("one"))
        assert outbox.queued == 0  # written already: no writer runs in this test
        with deadline(5, "the frame"):
            assert await receive_exactly(peer, len(encoded(content("one")))) == encoded(
                content("one")
            )
        await trio.sleep(2 * CORK_S)  # the next lone frame goes the same way
        outbox.event(p.Content("two"))
        assert outbox.queued == 0
        with deadline(5, "the second frame"):
            assert await receive_exactly(peer, len(encoded(content("two")))) == encoded(
                content("two")
            )


async def test_the_frames_of_a_burst_wait_for_the_writer_and_keep_their_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with outbox_pair() as (outbox, peer):
        frames = [content(f"w{i}") for i in range(5)]
        for each in frames:
            outbox.put(each)  # all at one instant: the clock does not move between them
        assert outbox.queued == len(encoded(*frames[1:]))  # the first alone went at once
        await trio.sleep(2 * CORK_S)
        frames.append(content("later"))
        outbox.put(frames[-1])  # the socket has room, but the burst waits: it goes behind
        with deadline(5, "the burst"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.write)
                got = await receive_exactly(peer, len(encoded(*frames)))
                outbox.close()
                await outbox.flushed()
        assert got == encoded(*frames)
        assert outbox.queued == 0


async def test_a_frame_the_socket_cannot_take_whole_is_finished_by_the_writer_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with outbox_pair() as (outbox, peer):
        big = content("x" * 900_000)  # more than a socket's buffer holds
        outbox.put(big)
        assert 0 < outbox.queued < len(encoded(big))  # the socket took a part at once
        await trio.sleep(2 * CORK_S)
        outbox.put(content("after"))  # something waits: it goes behind, never ahead
        with deadline(5, "both frames"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.write)
                got = await receive_exactly(peer, len(encoded(big, content("after"))))
                outbox.close()
                await outbox.flushed()
        assert got == encoded(big, content("after"))


async def test_a_closed_sockets_number_is_never_written_to(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ours, theirs = trio.socket.socketpair()
    number = ours.fileno()
    stream = trio.SocketStream(ours)
    outbox = Outbox(stream, turn_connection(), 30.0, trio.CancelScope(), "test")
    await stream.aclose()
    theirs.close()
    reused = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert reused == number  # the system gave the closed socket's number to the file
        outbox.event(p.Content("not for the file"))
    finally:
        os.close(reused)
    assert (tmp_path / "log").read_bytes() == b""
    assert outbox.queued > 0  # kept for the writer, which meets the closed stream


async def test_a_frame_never_overtakes_what_the_writer_is_still_sending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    mine_raw, peer = socket.socketpair()  # the peer read here without yielding to trio
    peer.setblocking(False)
    async with trio.SocketStream(trio.socket.from_stdlib_socket(mine_raw)) as mine:
        outbox = Outbox(mine, turn_connection(), 30.0, trio.CancelScope(), "test")
        big, after = content("x" * 900_000), content("after")
        with deadline(5, "both frames"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.write)
                outbox.put(big)  # the socket takes a part; the writer waits to send the rest
                await trio.testing.wait_all_tasks_blocked()
                first = peer.recv(100_000)  # room in the socket, the writer not yet woken
                autojump_clock.jump(1)  # long after the last frame written at once
                outbox.put(after)  # the writer still holds part of `big`: this goes behind
                got = first + await _read_all(peer, len(encoded(big, after)) - len(first))
                outbox.close()
        assert got == encoded(big, after)
    peer.close()


async def _read_all(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        await trio.lowlevel.wait_readable(sock)
        data += sock.recv(size - len(data))
    return data


async def test_a_channel_gone_fails_no_frame_put_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.socket.socketpair()
    async with trio.SocketStream(ours) as mine:
        outbox = Outbox(mine, turn_connection(), 30.0, trio.CancelScope(), "test")
        theirs.close()  # the channel left: writing now fails (EPIPE)
        outbox.event(p.Content("for no one"))  # does not raise into the turn
        assert outbox.queued > 0  # the writer meets the failure, as it always did
