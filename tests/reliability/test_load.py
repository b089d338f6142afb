"""Load (SPEC section 13): 100 concurrent connections on a mix of sessions against a live
`loopd serve`. Every one gets its final frame; `session_busy` only for a session already in a
turn; loopd's memory is reported and stays bounded over rounds.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import trio
from attrs import define
from bxdev.processes import Process

from boxmaker import proto as p
from boxmaker.client import open_channel

from ..processes import BIN, Stack
from ..soak import count, note, size

CONNECTIONS = 100
ANSWER = "A steady answer of a dozen words or so, streamed one token at a time."


@define
class Outcome:
    session: p.SessionId
    content: str
    sent: float
    final: p.TurnDoneFrame | p.WireError | None = None
    ended: float = 0.0


async def one_round(
    socket: Path, rng: random.Random, round_: int, known: set[str]
) -> list[Outcome]:
    """CONNECTIONS turns at once: most on sessions of earlier rounds (so some collide), some
    creating new ones."""
    outcomes: list[Outcome] = []
    earlier = sorted(known)

    async def connection(session: p.SessionId, resume: bool, n: int) -> None:
        content = f"Round {round_}, connection {n}."
        async with await open_channel(socket) as loop:
            await loop.send(p.TurnFrame(session, content, resume=resume))
            outcome = Outcome(session, content, trio.current_time())
            outcomes.append(outcome)
            while not isinstance(final := await loop.receive(), p.TurnDoneFrame | p.WireError):
                pass
            outcome.final, outcome.ended = final, trio.current_time()

    async with trio.open_nursery() as nursery:
        for n in range(CONNECTIONS):
            if rng.random() < 0.8 and earlier:
                name, resume = rng.choice(earlier), True
            else:
                name, resume = f"load-{round_}-{n}", False
                known.add(name)
            nursery.start_soon(connection, p.SessionId(name), resume, n)
    return outcomes


def check_round(stack: Stack, outcomes: list[Outcome]) -> None:
    assert len(outcomes) == CONNECTIONS
    for outcome in outcomes:
        final = outcome.final
        assert final is not None
        if isinstance(final, p.WireError):
            assert final.code is p.ErrorCode.SESSION_BUSY, final
            # Busy only while another turn on that session ran: one that was sent before this
            # answer came and ended after this was sent.
            assert any(
                isinstance(other.final, p.TurnDoneFrame)
                and other.session == outcome.session
                and other.sent <= outcome.ended
                and other.ended >= outcome.sent
                for other in outcomes
            ), f"{outcome} was busy with no other turn running"
        count("load connections", "turn_done" if isinstance(final, p.TurnDoneFrame) else "busy")
    done = Counter(o.content for o in outcomes if isinstance(o.final, p.TurnDoneFrame))
    for session in {o.session for o in outcomes}:
        users = user_turns(stack, session.value)
        ours = [u for u in users if u in {o.content for o in outcomes}]
        assert Counter(ours) == Counter(
            o.content for o in outcomes if o.session == session and o.content in done
        ), f"{session}: the log's turns are not the ones that were done"


def user_turns(stack: Stack, session: str) -> list[str]:
    """The user messages of every turn of `session`, in every epoch: a session on which many
    turns ran switches epochs, and the turns a new epoch carries are copies of records of the
    last (the same record, its time too), counted once."""
    seen: set[tuple[str, str]] = set()
    contents = []
    folder = stack.home / "sessions" / session
    for log in sorted(folder.glob("[0-9]*.jsonl"), key=lambda path: int(path.stem)):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            key = (record.get("time", ""), record.get("content", ""))
            if record["type"] == "user" and key not in seen:
                seen.add(key)
                contents.append(record["content"])
    return contents


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_a_hundred_concurrent_connections_each_get_their_final_frame(
    tmp_path: Path,
) -> None:
    stack = Stack(tmp_path, {"default": {"content": ANSWER}}, "--ms-per-token", "1")
    try:
        rng, known = random.Random(5), set[str]()
        pid = stack.loopd.popen.pid
        readings = [rss_mb(pid)]
        for round_ in range(size(3, 30)):
            check_round(stack, await one_round(stack.socket, rng, round_, known))
            readings.append(rss_mb(pid))
        note(
            f"load: loopd RSS {readings[0]:.0f} MB at start, {readings[1]:.0f} MB after the "
            f"first round of {CONNECTIONS}, {readings[-1]:.0f} MB after round {len(readings) - 1}"
        )
        assert readings[-1] < 200
        # Bounded: no growth per round (a collector left unable to reach the event loop's
        # garbage made 11 MB over 30 rounds).
        assert readings[-1] - readings[1] < 6, readings
    finally:
        stack.stop()


async def test_out_of_file_descriptors_loopd_pauses_and_every_connection_is_answered(
    tmp_path: Path,
) -> None:
    """With far fewer descriptors than connections, accept fails with EMFILE: loopd waits for
    connections to end instead of stopping. Every connection gets its final frame — a turn
    that could not open a file says so (`internal`, naming it; or `inference` if it was the
    connection to the server) — and loopd serves on."""
    stack = Stack(tmp_path, {"default": {"content": ANSWER}}, "--ms-per-token", "1")
    try:
        stack.loopd.stop()
        limited = (
            "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48)); "
            "from boxmaker.loopd.main import main; sys.exit(main())"
        )
        stack.loopd = Process([str(BIN / "python"), "-c", limited, "serve", "--config",
                               str(stack.config)], stack.env, stack.root)  # fmt: skip
        stack.loopd.err.wait_for("listening on")
        outcomes = await one_round(stack.socket, random.Random(6), 0, set())
        assert len(outcomes) == CONNECTIONS
        for outcome in outcomes:
            final = outcome.final
            if isinstance(final, p.WireError) and final.code is p.ErrorCode.INFERENCE:
                assert "connect" in final.message, final  # no descriptor for the server
            elif isinstance(final, p.WireError):
                assert final.code is p.ErrorCode.INTERNAL, final
                assert "Too many open files" in final.message
                assert str(tmp_path) in final.message
            count("connections past the descriptor limit", type(final).__name__)
        assert "pausing until it passes" in stack.loopd.err.wait_for("cannot accept")
        assert stack.loopd.popen.poll() is None
        async with await open_channel(stack.socket) as loop:  # with the descriptors back
            await loop.send(p.TurnFrame(p.SessionId("after"), "Hi.", resume=False))
            while not isinstance(final := await loop.receive(), p.TurnDoneFrame | p.WireError):
                pass
        assert isinstance(final, p.TurnDoneFrame), final
    finally:
        stack.stop()
