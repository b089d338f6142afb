"""Turns that outlive their channel, with processes (issue 43): `loopd serve` killed with
SIGKILL mid-turn closes that turn as `interrupted` when it starts again, and a watcher and a
second frame of the same origin are told so; `bxctl watch` shows a turn another channel
started; `bxctl stop` stops a detached turn whose channel is gone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.channel import END, NEED_DATA, BadFrame, FrameDecoder, encode_frame

from ..processes import BIN, WAIT_S, Process, Stack, Terminal

SCRIPT = {"replies": [{"content": "First answer."}], "default": {"content": "Later answer."}}
ORIGIN = p.Origin("matrix", "$event-7")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path, SCRIPT)
    try:
        yield running
    finally:
        running.stop()


def connect(stack: Stack, request: p.Frame) -> tuple[socket.socket, FrameDecoder]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(WAIT_S)
    sock.connect(str(stack.socket))
    sock.sendall(encode_frame(request))
    return sock, FrameDecoder()


def receive(sock: socket.socket, decoder: FrameDecoder) -> p.Frame:
    while (frame := decoder.next_frame()) is NEED_DATA:
        decoder.receive_data(sock.recv(65536))
    assert frame is not END, "loopd closed the connection"
    assert not isinstance(frame, BadFrame), frame
    return frame  # type: ignore[no-any-return]


def request(stack: Stack, frame: p.Frame) -> p.Frame:
    """One request's final frame."""
    sock, decoder = connect(stack, frame)
    with sock:
        while not p.frame_is_final(got := receive(sock, decoder)):
            pass
    return got


def killed_mid_turn(stack: Stack) -> None:
    """loopd killed (SIGKILL) in the middle of s1's turn of `ORIGIN`, then started again."""
    assert request(stack, p.TurnFrame(p.SessionId("s1"), "Hello.", resume=False)).content  # type: ignore[union-attr]
    stack.hold()  # the next request waits in the server's slot: loopd is mid-turn
    sock, decoder = connect(stack, p.TurnFrame(p.SessionId("s1"), "Go on.", resume=True,
                                               detach=True, origin=ORIGIN))  # fmt: skip
    with sock:
        assert receive(sock, decoder) == p.TurnEventFrame(p.Waiting(slot_busy=0))
        os.kill(stack.loopd.popen.pid, signal.SIGKILL)
        stack.loopd.stop()  # reaps it and closes its pipes
    stack.release()
    assert [r["type"] for r in stack.log("s1")][-1] == "user"  # what the kill left
    stack.loopd = stack.start_loopd()
    stack.loopd.err.wait_for("listening on")


def bxctl(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "bxctl"), *args], env=stack.env, capture_output=True,
                          text=True, timeout=WAIT_S)  # fmt: skip


def test_a_turn_killed_with_loopd_is_closed_as_interrupted_when_it_starts_again(
    stack: Stack,
) -> None:
    killed_mid_turn(stack)
    assert "s1: its turn was interrupted when loopd stopped; closed" in stack.loopd.err.text()
    log = stack.log("s1")
    assert log[-2]["origin"] == {"channel": "matrix", "id": "$event-7"}
    assert (log[-1]["type"], log[-1]["outcome"]) == ("turn_end", "interrupted")
    watcher = Process([str(BIN / "bxctl"), "watch", "s1", "--json"], stack.env, stack.root)
    try:
        watcher.err.wait_for("watching s1")
        told = json.loads(watcher.out.wait_for('"kind":"watch_event"'))
        assert told["body"]["origin"] == {"channel": "matrix", "id": "$event-7"}
        assert told["body"]["frame"]["body"]["code"] == "interrupted"
    finally:
        watcher.stop()
    again = p.TurnFrame(p.SessionId("s1"), "Go on.", resume=True, origin=ORIGIN)
    assert request(stack, again) == p.DuplicateFrame(ORIGIN, "interrupted")
    assert len(stack.log("s1")) == len(log)  # nothing ran


def test_bxctl_watch_shows_a_turn_another_channel_started(stack: Stack) -> None:
    assert stack.bxctl("--session", "s1", "--new", "--say", "Hello.").returncode == 0
    watcher = Process([str(BIN / "bxctl"), "watch", "s1"], stack.env, stack.root)
    try:
        watcher.err.wait_for("watching s1")  # the watch is in place
        said = stack.bxctl("--session", "s1", "--say", "Anything new?")
        assert said.returncode == 0
        watcher.out.wait_for("> Anything new?")
        watcher.out.wait_for("Later answer.")
    finally:
        watcher.stop()


def test_bxctl_stop_stops_a_detached_turn_whose_channel_left(stack: Stack) -> None:
    assert stack.bxctl("--session", "s1", "--new", "--say", "Hello.").returncode == 0
    stack.hold()
    sock, decoder = connect(stack, p.TurnFrame(p.SessionId("s1"), "A long job.", resume=True,
                                               detach=True))  # fmt: skip
    with sock:
        assert receive(sock, decoder) == p.TurnEventFrame(p.Waiting(slot_busy=0))
    stopped = bxctl(stack, "stop", "s1")
    assert (stopped.returncode, stopped.stdout) == (0, "s1: stopped its turn\n")
    stack.release()
    stack.loopd.err.wait_for("turn s1: stopped in")
    log = stack.log("s1")
    assert (log[-2]["type"], log[-2]["hard"]) == ("break", True)
    assert log[-1]["outcome"] == "stopped"
    again = bxctl(stack, "stop", "s1")
    assert (again.returncode, again.stdout) == (0, "s1: no turn runs in it\n")
    assert stack.bxctl("--session", "s1", "--say", "Still here?").returncode == 0


def test_bxctl_chat_says_its_last_turn_was_interrupted_and_shows_other_channels_turns(
    stack: Stack,
) -> None:
    killed_mid_turn(stack)
    term = Terminal([str(BIN / "bxctl"), "chat", "--session", "s1"], stack.env)
    try:
        at = term.wait_for("the last turn (from matrix:$event-7) was interrupted")
        other = p.TurnFrame(p.SessionId("s1"), "From my phone.", resume=True,
                            origin=p.Origin("matrix", "$event-8"))  # fmt: skip
        assert isinstance(request(stack, other), p.TurnDoneFrame)
        at = term.wait_for("a turn from matrix:$event-8", start=at)
        at = term.wait_for("> From my phone.", start=at)
        at = term.wait_for("Later answer.", start=at)
        term.wait_for_prompt(start=at)  # drawn again below what was written above it
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()


def test_a_detached_turn_whose_channel_left_gets_loopd_s_grace_when_it_stops(
    stack: Stack,
) -> None:
    assert request(stack, p.TurnFrame(p.SessionId("s1"), "Hello.", resume=False)).content  # type: ignore[union-attr]
    stack.hold()
    sock, decoder = connect(stack, p.TurnFrame(p.SessionId("s1"), "Finish this.", resume=True,
                                               detach=True, origin=ORIGIN))  # fmt: skip
    with sock:
        assert receive(sock, decoder) == p.TurnEventFrame(p.Waiting(slot_busy=0))
    stack.loopd.popen.send_signal(signal.SIGTERM)
    stack.loopd.err.wait_for("waiting for the turns still running: 1 turns running (1 detached)")
    stack.release()  # no connection is open: only its grace keeps it
    assert stack.loopd.popen.wait(WAIT_S) == 0
    log = stack.log("s1")
    assert (log[-1]["type"], log[-1]["outcome"]) == ("turn_end", "done")
    assert log[-3]["content"] == "Later answer."
