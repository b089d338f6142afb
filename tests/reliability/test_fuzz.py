"""Bad input on the socket (SPEC section 13): generated frames against a live `loopd serve`.

Each connection gets one generated case: malformed JSON, unknown kinds, wrong types, missing
fields, session ids that try to leave `sessions/`, frames loopd sends rather than receives,
frames over 1 MiB, frames written a byte at a time, clients that say nothing, clients that
leave at every point, and valid turns among them. loopd must answer each with a clear `error`
(or run the turn) or drop it, never crash, leak nothing, and serve a normal turn afterwards.
"""

from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import trio
from attrs import frozen

from boxmaker import proto as p
from boxmaker.channel import END, MAX_FRAME, NEED_DATA, BadFrame, FrameDecoder
from boxmaker.client import open_channel

from ..processes import Stack
from ..soak import count, size

POOL = [f"fz-{n}" for n in range(6)]
AT_ONCE = 16  # connections the driver keeps open at a time
TURN_CODES = {"no_such_session", "session_exists", "session_busy", "session_full", "stopped"}
ESCAPES = ["..", ".", "", "../x", "a/b", "/etc", "sessions/../x", "a\x00b", "x" * 200, "é",
           "-a", ".hidden", "a b", "a\\b", "~", "%2e%2e"]  # fmt: skip


@frozen
class Case:
    """What one connection does, and what it must get back.

    `expect` is "bad" (exactly one `error bad_frame`), "turn" (events, then `turn_done` or a
    session's error), "cut" (perhaps events, then `error bad_frame`: more came after the turn
    frame), or "any" (it leaves early: whatever came must be frames).
    """

    name: str
    data: bytes
    expect: str
    how: str = "whole"  # whole, bytes (one byte per write), leave (after `leave_after` frames)
    leave_after: int = 0


def turn_body(rng: random.Random) -> dict[str, Any]:
    letters = string.printable + "é漢🙂\u2028"
    content = "".join(rng.choice(letters) for _ in range(rng.randrange(40)))
    body: dict[str, Any] = {"session": rng.choice(POOL), "content": content or "Hi.",
                            "resume": rng.random() < 0.6}  # fmt: skip
    if rng.random() < 0.5:
        body["thinking"] = rng.random() < 0.5
    if rng.random() < 0.3:
        body["detach"] = rng.random() < 0.7
    if rng.random() < 0.3:  # a few origins, so that some come twice: `duplicate`
        body["origin"] = {"channel": rng.choice(["matrix", "schedule"]),
                          "id": f"$e{rng.randrange(20)}"}  # fmt: skip
    return body


def line(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def turn_frame(body: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "turn", "final": False, "body": body}


WRONG = [None, 1, -1.5, True, "text", [], {}, [1, "a"], {"a": 1}]


def wrong_type(rng: random.Random) -> Case:
    frame = turn_frame(turn_body(rng))
    where = rng.choice(["kind", "final", "body", "session", "content", "resume", "thinking"])
    holder = frame if where in ("kind", "final", "body") else frame["body"]
    right = holder.get(where, True)
    holder[where] = rng.choice([w for w in WRONG if type(w) is not type(right)])
    return Case(f"wrong type of {where}", line(frame), "bad")


def missing(rng: random.Random) -> Case:
    frame = turn_frame(turn_body(rng))
    where = rng.choice(["kind", "final", "body", "session", "content", "resume"])
    del (frame if where in ("kind", "final", "body") else frame["body"])[where]
    return Case(f"no {where}", line(frame), "bad")


def garbage(rng: random.Random) -> Case:
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))).replace(b"\n", b"")
    return Case("random bytes", (data or b"\xff") + b"\n", "bad")


def broken_json(rng: random.Random) -> Case:
    whole = line(turn_frame(turn_body(rng)))[:-1]
    return Case("cut JSON", whole[: rng.randrange(len(whole) - 1)] + b"\n", "bad")


def unknown_kind(rng: random.Random) -> Case:
    kind = rng.choice(["", "Turn", "turn ", "hello", "ping", "x" * 50])
    return Case(f"kind {kind!r}", line({"kind": kind, "final": False, "body": {}}), "bad")


def loopd_kind(rng: random.Random) -> Case:
    origin = {"channel": "matrix", "id": "$e1"}
    frame = rng.choice([
        {"kind": "turn_event", "final": False, "body": {"event": {"type": "content", "text": "x"}}},
        {"kind": "turn_done", "final": True, "body": {"content": "x", "usage": {}}},
        {"kind": "error", "final": True, "body": {"code": "internal", "message": "x"}},
        {"kind": "watching", "final": False, "body": {"sessions": ["s1"]}},
        {"kind": "duplicate", "final": True, "body": {"origin": origin, "outcome": "done"}},
        {"kind": "stopped", "final": True, "body": {"session": "s1", "stopped": True}},
        {"kind": "watch_event", "final": False,
         "body": {"session": "s1", "origin": None, "frame": {"kind": "turn_done", "final": True,
                                                              "body": {"content": "x"}}}},
    ])  # fmt: skip
    return Case(f"a {frame['kind']} frame", line(frame), "bad")


BAD_ORIGINS = [
    {}, {"channel": "m"}, {"channel": "", "id": "1"}, {"channel": "m", "id": "x" * 257},
    {"channel": 1, "id": "1"}, {"channel": "m", "id": "1", "more": 1}, "m:1", [],
]  # fmt: skip


def bad_origin(rng: random.Random) -> Case:
    body = turn_body(rng) | {"origin": rng.choice(BAD_ORIGINS)}
    return Case(f"origin {body['origin']!r:.30}", line(turn_frame(body)), "bad")


def watch_frame(sessions: object, **more: object) -> bytes:
    return line({"kind": "watch", "final": False, "body": {"sessions": sessions, **more}})


def watching(rng: random.Random) -> Case:
    sessions = rng.sample(POOL, rng.randrange(1, len(POOL) + 1))
    data = watch_frame(sessions, **({"can_ask": rng.random() < 0.5} if rng.random() < 0.5 else {}))
    return Case("a watch", data, "watch", "leave", leave_after=rng.randrange(1, 4))


def bad_watch(rng: random.Random) -> Case:
    sessions = rng.choice([[], ["s1", "s1"], [f"w{n}" for n in range(65)], ["../x"], "s1", [1]])
    return Case(f"a watch of {sessions!r:.30}", watch_frame(sessions), "bad")


def watch_and_more(rng: random.Random) -> Case:
    return Case("a watch and more", watch_frame([rng.choice(POOL)]) + b"more\n", "cut")


def stop(rng: random.Random) -> Case:
    data = line({"kind": "stop", "final": False, "body": {"session": rng.choice(POOL)}})
    return Case("a stop", data, "stopped")


def escaping_id(rng: random.Random) -> Case:
    body = turn_body(rng)
    body["session"] = rng.choice(ESCAPES)
    return Case(f"session id {body['session'][:20]!r}", line(turn_frame(body)), "bad")


def huge(rng: random.Random) -> Case:
    if rng.random() < 0.5:
        return Case("over 1 MiB, no newline", b"x" * (MAX_FRAME + 1 + rng.randrange(5000)), "bad")
    body = turn_body(rng) | {"content": "y" * MAX_FRAME}
    return Case("a turn over 1 MiB", line(turn_frame(body)), "bad")


def empty(rng: random.Random) -> Case:
    return Case("an empty line", rng.choice([b"\n", b"   \n", b"\r\n"]), "bad")


def valid(rng: random.Random) -> Case:
    return Case("a turn", line(turn_frame(turn_body(rng))), "turn")


def byte_by_byte(rng: random.Random) -> Case:
    return Case("a turn a byte at a time", line(turn_frame(turn_body(rng))), "turn", "bytes")


def with_more(rng: random.Random) -> Case:
    extra = rng.choice([b"garbage\n", line(turn_frame(turn_body(rng))), b"{"])
    return Case("a turn and more", line(turn_frame(turn_body(rng))) + extra, "cut")


def cut_short(rng: random.Random) -> Case:
    whole = line(turn_frame(turn_body(rng)))
    return Case("part of a frame, then gone", whole[: rng.randrange(len(whole))], "any", "leave")


def leaves(rng: random.Random) -> Case:
    data = line(turn_frame(turn_body(rng)))
    return Case("a turn, then gone", data, "any", "leave", leave_after=rng.randrange(6))


GENERATORS: list[Callable[[random.Random], Case]] = [
    wrong_type, missing, garbage, broken_json, unknown_kind, loopd_kind, escaping_id, empty,
    valid, valid, byte_by_byte, with_more, cut_short, leaves, leaves,
    bad_origin, watching, bad_watch, watch_and_more, stop,
]  # fmt: skip


def cases(rng: random.Random, n: int) -> Iterator[Case]:
    huge_every = max(n // 20, 1)  # a few dozen MiB in all, not hundreds
    for i in range(n):
        yield huge(rng) if i % huge_every == 0 else rng.choice(GENERATORS)(rng)


async def run_case(socket: Path, case: Case) -> list[p.Frame | BadFrame]:
    """Play `case` on a new connection; the frames loopd sent before it closed."""
    stream = await trio.open_unix_socket(str(socket))
    frames: list[p.Frame | BadFrame] = []
    decoder = FrameDecoder(max_frame=2 * MAX_FRAME)

    async def send() -> None:
        try:
            if case.how == "bytes":
                for i in range(len(case.data)):
                    await stream.send_all(case.data[i : i + 1])
            else:
                await stream.send_all(case.data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # loopd answered and closed before reading it all (a frame over the limit)

    async def receive() -> None:
        while True:
            frame = decoder.next_frame()
            if frame is END:
                return
            if frame is NEED_DATA:
                try:
                    decoder.receive_data(await stream.receive_some())
                except trio.BrokenResourceError:  # closed with our bytes unread: a reset
                    decoder.receive_data(b"")
                continue
            frames.append(frame)  # type: ignore[arg-type]
            if case.how == "leave" and len(frames) >= case.leave_after:
                return

    with trio.fail_after(60):  # a hang is a failure, not a wait
        async with stream, trio.open_nursery() as nursery:
            nursery.start_soon(send)
            if case.how != "leave" or case.leave_after:
                await receive()
            nursery.cancel_scope.cancel()
    return frames


def judge(case: Case, frames: list[p.Frame | BadFrame]) -> str:
    """The outcome of one case; raises if it is not what loopd promises."""
    assert not any(isinstance(f, BadFrame) for f in frames), f"{case.name}: not frames: {frames}"
    finals = [f for f in frames if not isinstance(f, BadFrame) and p.frame_is_final(f)]
    assert finals == frames[-1:] or not finals, f"{case.name}: final frame not last: {frames}"
    if case.expect == "bad":
        assert len(frames) == 1, f"{case.name}: {frames}"
        error = frames[0]
        assert isinstance(error, p.WireError), f"{case.name}: {error}"
        assert error.code is p.ErrorCode.BAD_FRAME, f"{case.name}: {error}"
        assert error.message, f"{case.name}: {error}"
        return "bad_frame"
    if case.expect == "cut":
        assert finals, f"{case.name}: no final frame: {frames}"
        assert isinstance(finals[0], p.WireError), f"{case.name}: {finals[0]}"
        assert finals[0].code is p.ErrorCode.BAD_FRAME, f"{case.name}: {finals[0]}"
        assert "after the turn frame" in finals[0].message, f"{case.name}: {finals[0]}"
        return "more after the turn: bad_frame"
    if case.expect == "watch":
        assert isinstance(frames[0], p.WatchingFrame) or frames[0] == p.WireError(
            p.ErrorCode.TOO_MANY_WATCHES,
            frames[0].message,  # type: ignore[union-attr]
        ), f"{case.name}: {frames}"
        assert all(isinstance(f, p.WatchEventFrame) for f in frames[1:]), f"{case.name}: {frames}"
        return "watch" if isinstance(frames[0], p.WatchingFrame) else "too_many_watches"
    if case.expect == "stopped":
        assert len(frames) == 1, f"{case.name}: {frames}"
        assert isinstance(frames[0], p.StoppedFrame), f"{case.name}: {frames}"
        return f"stop: {'a turn stopped' if frames[0].stopped else 'none running'}"
    if case.expect == "turn":
        assert finals, f"{case.name}: no final frame: {frames}"
        final = finals[0]
        if isinstance(final, p.TurnDoneFrame):
            return "turn_done"
        if isinstance(final, p.DuplicateFrame):
            return f"duplicate ({final.outcome})"
        assert isinstance(final, p.WireError)
        assert final.code.value in TURN_CODES, f"{case.name}: {final}"
        return final.code.value
    return "left early"


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_generated_frames_are_answered_or_dropped_and_loopd_serves_on(
    tmp_path: Path,
) -> None:
    stack = Stack(tmp_path, {"default": {"content": "Fine."}})
    try:
        pid = stack.loopd.popen.pid
        before = fds(pid)
        n = size(1_000, 10_000)
        silent: list[trio.SocketStream] = []
        limit = trio.CapacityLimiter(AT_ONCE)

        async def one(case: Case) -> None:
            async with limit:
                count("fuzz frames", judge(case, await run_case(stack.socket, case)))

        async with trio.open_nursery() as nursery:
            for i, case in enumerate(cases(random.Random(7), n)):
                if i % 100 == 0:  # some clients connect and say nothing all along
                    silent.append(await trio.open_unix_socket(str(stack.socket)))
                nursery.start_soon(one, case)
        for stream in silent:
            await stream.aclose()
        count("fuzz frames", "silent, then gone", len(silent))

        assert stack.loopd.popen.poll() is None, "loopd died"
        async with await open_channel(stack.socket) as loop:
            await loop.send(p.TurnFrame(p.SessionId("after-fuzz"), "Still there?", resume=False))
            while not isinstance(final := await loop.receive(), p.TurnDoneFrame | p.WireError):
                pass
        assert final == p.TurnDoneFrame(content="Fine.", usage=final.usage)  # type: ignore[union-attr]
        assert set(os.listdir(stack.home / "sessions")) <= {*POOL, "after-fuzz"}
        beside = ["config.toml", "home", "policy.toml", "script.json", "system.md"]
        assert sorted(os.listdir(tmp_path)) == beside  # brokerd made the shipped policy
        assert sorted(os.listdir(stack.home)) == [
            "broker",
            "brokerd.lock",
            "loopd.lock",
            "memory",
            "run",
            "sessions",
            "workspace",
        ]  # fmt: skip  (broker: brokerd's checkpoints, taken at its start)
        # Nothing left open by the connections: the cached sessions' logs, a connection or two
        # to the server, and the last few connections, which loopd may still be closing (a
        # leak would grow with the thousands of cases instead).
        assert fds(pid) <= before + len(POOL) + 2 + AT_ONCE
        assert "Traceback" not in stack.loopd.err.text()
    finally:
        stack.stop()
