"""Crash safety (SPEC section 13): `loopd serve` killed with SIGKILL at random moments of turns
with tools loses and corrupts nothing, epoch switches included.

Four channels drive turns on four sessions at once (four new ones every ten kills) against the
fake server on TCP, whose context is small enough that every session crosses epochs; loopd is
killed when the channels together have received a random number of frames (seeded), so the
kills land at every stage: a session being created, a request queued at the gate or streaming,
a tool call, records being written, a final frame on its way, a summary being asked for, an
epoch being put in place. Breaks are in the mix: while some turns run, a second
channel sends a soft break (taken at a step boundary, or run as a turn of its own) or a hard
break (the turn is cut, its message runs). After each kill every session resumes (finishing a
switch that was decided), every epoch passes `bxctl verify --all`, and every turn whose
`turn_done` a channel received is whole in the newest epoch that holds it. The next loopd heals
what the kill left dangling and goes on.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import trio

from boxmaker import proto as p
from boxmaker.client import ChannelError, open_channel
from boxmaker.clock import TickingClock
from boxmaker.session import Problem, finished_writes, sha256_hex, starts_turn
from boxmaker.store import Store, check_epochs, current_epoch

from ..helpers import read_epochs
from ..processes import Stack
from ..soak import count, size

KILLS_PER_SESSION = 10  # then four new sessions
N_CTX = "2880"  # a session crosses an epoch every few turns (the baseline is ~1,910)


def sessions(kill: int) -> list[p.SessionId]:
    return [p.SessionId(f"crash-{kill // KILLS_PER_SESSION}-{n}") for n in range(4)]


ECHO = json.dumps({"name": "echo", "arguments": {"text": "kept"}})
# Long turns of tool calls are fine here: the kills are what is tested, not the limits.
CONFIG = "[loop]\ntool_iterations = 100\nrepeat_detection = false\n"

Done = dict[p.SessionId, list[tuple[str, str | None]]]
STEERING = [None, None, p.Break.SOFT, p.Break.HARD]  # a break sent during some turns


def script(rng: random.Random, replies: int) -> dict[str, object]:
    """Answers in a random order: a `clock` call, an `echo` through `call_tool`, or text."""
    choices = [
        {"tool_calls": [["clock", "{}"]]},
        {"tool_calls": [["call_tool", ECHO]]},
        {"tool_calls": [["clock", "{}"], ["call_tool", ECHO]]},
        {"reasoning": "Thinking it over.", "content": "Here is my answer, in a few words."},
        {"content": "Done."},
    ]
    return {
        "replies": [rng.choice(choices) for _ in range(replies)],
        "default": {"content": "The script ran out."},
    }


async def test_sigkill_at_random_moments_loses_and_corrupts_nothing(tmp_path: Path) -> None:
    rng = random.Random(13)
    kills = size(30, 300)
    stack = Stack(tmp_path, script(rng, replies=kills * 40), "--n-ctx", N_CTX, config=CONFIG)
    done: Done = defaultdict(list)
    try:
        for kill in range(kills):
            if kill:
                assert stack.fake.popen.poll() is None, stack.fake.err.text()
                stack.loopd = stack.start_loopd()
                stack.loopd.err.wait_for("listening on")
            await drive_until_killed(stack, kill, rng.randrange(0, 200), done, rng)
            count("kills", "every session resumed, every turn_done whole")
            await check_logs(stack.home, sessions(kill), done)
    finally:
        stack.stop()
    count("turns whose turn_done came", "whole in the log", sum(map(len, done.values())))
    folders = list((stack.home / "sessions").iterdir())
    count("epochs opened", f"in {len(folders)} sessions", sum(map(current_epoch, folders)))
    for log in (stack.home / "sessions").glob("*/[0-9]*.jsonl"):  # carried copies counted too
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record["type"] == "break":
                count(
                    "crash: break records",
                    f"{'hard' if record['hard'] else 'soft'}, {record['at']}",
                )


async def drive_until_killed(
    stack: Stack, kill: int, after: int, done: Done, rng: random.Random
) -> None:
    """Turns on every session until loopd is killed, once `after` frames have come; during
    some of them a second channel sends a break."""
    received = 0
    killed = trio.Event()
    plans = {session: [rng.choice(STEERING) for _ in range(64)] for session in sessions(kill)}

    def sigkill() -> None:
        os.kill(stack.loopd.popen.pid, signal.SIGKILL)
        stack.loopd.stop()  # reaps it and closes its pipes
        killed.set()

    async def converse(frame: p.TurnFrame, on_first: Callable[[], None] = lambda: None) -> None:
        """One connection: the frame out, frames in until the final one (or the kill)."""
        nonlocal received
        session, what = frame.session, frame.break_.value if frame.break_ else "turn"
        try:
            async with await open_channel(stack.socket) as loop:
                await loop.send(frame)
                while True:
                    final = await loop.receive()
                    received += 1
                    if received == after:
                        sigkill()
                    on_first()
                    if isinstance(final, p.WireError) and final.code is p.ErrorCode.SESSION_FULL:
                        # A turn of many tool calls can outgrow what the small context has
                        # left: it ends session_full and the next opens an epoch.
                        count("crash: channels", f"{what}, session_full (the next opens an epoch)")
                        return
                    if isinstance(final, p.WireError):
                        # A break stopped the turn it was in (or the one it joined).
                        assert final.code is p.ErrorCode.BREAK_HARD, f"{session}: {final}"
                        count("crash: channels", f"{what}, stopped by a hard break")
                        return
                    if isinstance(final, p.TurnDoneFrame):
                        done[session].append((frame.content, final.content))
                        count("crash: channels", f"{what}, turn_done")
                        return
        except ChannelError:
            assert killed.is_set(), "the channel broke while loopd was up"
            count("crash: channels", f"{what}, cut by the kill")

    async def channel(session: p.SessionId, nursery: trio.Nursery) -> None:
        for n in range(len(plans[session])):
            content = f"Turn {kill}.{n} on {session}."

            def steer(n: int = n) -> None:
                """At the turn's first frame, its break if it has one."""
                steering, plans[session][n] = plans[session][n], None
                if steering is not None and not killed.is_set():
                    text = f"A {steering.value} break {kill}.{n} on {session}."
                    frame = p.TurnFrame(session, text, resume=True, break_=steering)
                    nursery.start_soon(converse, frame)

            await converse(p.TurnFrame(session, content, resume=stack_has(stack, session)), steer)
            if killed.is_set():
                return

    async with trio.open_nursery() as nursery:
        if after == 0:
            sigkill()
        for session in sessions(kill):
            nursery.start_soon(channel, session, nursery)


def stack_has(stack: Stack, session: p.SessionId) -> bool:
    return (stack.home / "sessions" / session.value / "0.jsonl").is_file()


async def check_logs(home: Path, sessions: list[p.SessionId], done: Done) -> None:
    store = Store(home, TickingClock())
    for session in sessions:
        if not store.exists(session):
            assert not done[session], f"{session} answered turns and is gone"
            continue
        folder = store.folder(session)
        current = finished(folder / f"{current_epoch(folder)}.jsonl")
        if isinstance(current[-1], p.EpochEndRecord):
            count("logs after a kill", "an epoch switch decided, not done")
        if [name for name in os.listdir(folder) if ".staged-" in name]:
            count("logs after a kill", "an epoch's files staged, not in place")
        resumed = store.resume(session)  # every line valid, the baseline intact
        last = resumed.records[-1]
        whole = isinstance(last, p.TurnEndRecord | p.SessionStartRecord | p.SummaryRecord)
        count("logs after a kill", "at a turn's end" if whole else "mid-turn")
        if resumed.set_aside is not None:  # the kill cut a write short: it is kept aside
            count("logs after a kill", "last write cut short, set aside")
        verdict = check_epochs(folder, every=True)  # the chains, the order, the ends
        assert not isinstance(verdict, Problem), verdict
        assert not [name for name in os.listdir(folder) if name.startswith(".")]  # swept
        epochs = read_epochs(folder)
        try:
            for content, answer in done[session]:
                assert_whole(epochs, content, answer)
        finally:
            resumed.close()


def finished(path: Path) -> list[p.LogRecord]:
    """The records of an epoch's finished writes, as resume will read them (a write the kill
    cut short left out)."""
    genesis = sha256_hex(path.with_name(f"{path.name.split('.')[0]}.baseline.json").read_bytes())
    return finished_writes(path.read_bytes(), path, genesis)[0].records


def assert_whole(epochs: list[list[p.LogRecord]], content: str, answer: str | None) -> None:
    """The message `content` is in the newest epoch that holds it once (an epoch that carried
    it holds a copy), and the turn it began or joined (a soft break) has a result for every
    tool call and ends with the answer the channel was given, its usage, and a `turn_end`
    saying done."""
    holding = [e for e in epochs if any(getattr(r, "content", None) == content for r in e)]
    assert holding, f"{content!r} is in no epoch"
    records = holding[-1]
    users = [r.content if isinstance(r, p.UserRecord) else None for r in records]
    found = [i for i, user in enumerate(users) if user == content]
    assert len(found) == 1, f"{content!r} is in the log {len(found)} times"
    start = max(i for i in range(found[0] + 1) if users[i] is not None and starts_turn(records, i))
    ends_at = [i for i in range(start, len(records)) if isinstance(records[i], p.TurnEndRecord)]
    assert ends_at, f"the turn of {content!r} has no turn_end"
    turn = records[start + 1 : ends_at[0] + 1]
    assistants = [r for r in turn if isinstance(r, p.AssistantRecord)]
    calls = [call.id for r in assistants for call in r.tool_calls or ()]
    results = [r.tool_call_id for r in turn if isinstance(r, p.ToolResultRecord)]
    assert results == calls, f"{content!r}: calls {calls}, results {results}"
    final = assistants[-1]
    assert final.tool_calls is None, f"{content!r} ends with {final}"
    # A completion the context's end cut before any text (content null) answered "".
    assert (final.content or "") == answer, f"{content!r} ends with {final}"
    assert isinstance(turn[turn.index(final) + 1], p.UsageRecord)
    ends = [r for r in turn if isinstance(r, p.TurnEndRecord)]
    assert [r.outcome for r in ends] == [p.Outcome.DONE], f"{content!r} ends with {ends}"
