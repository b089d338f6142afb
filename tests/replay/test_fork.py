"""`bxctl fork` and the chat's `/fork`: a new session of another's first turns, whose first
request goes on from the bytes the server may still hold (SPEC section 20)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.cli.fork_command import chat_fork
from boxmaker.loopd.loop.words import FORKED
from boxmaker.loopd.replay import read_tape
from boxmaker.session import SessionExists
from boxmaker.store import CannotFork, fork_session
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import make_config, open_rig, replays_identical
from ..loop.test_turn import call_tool, turn
from ..processes import BIN
from .test_fixtures import FIXTURES

SCRIPT = [
    Reply(tool_calls=[call_tool("echo", text="hi")]),
    Reply(content="It said hi."),
    Reply(content="Two."),
    Reply(content="Three."),
    Reply(content="Forked."),
    Reply(content="Forked again."),
]


def kinds(records: list[p.LogRecord]) -> list[str]:
    return [p.unstructure(r)["type"] for r in records]


async def test_a_fork_keeps_the_first_turns_and_its_first_request_reuses_the_prefix(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=list(SCRIPT))
    async with open_rig(tmp_path, fake) as rig:
        await turn(rig, "Echo hi.")
        await turn(rig, "Two?")
        source = list(rig.session.records)
        await turn(rig, "Three?")  # the slot now holds all three turns
        forked = fork_session(tmp_path, rig.session.id, 2, p.SessionId("fork-1"))
        assert (forked.session.value, forked.epoch, forked.turns) == ("fork-1", 0, 2)
        rig.session.close()
        rig.session = rig.store.resume(p.SessionId("fork-1"))
        records = list(rig.session.records)
        start = records[0]
        assert isinstance(start, p.SessionStartRecord)
        assert (start.session.value, start.fork) == ("fork-1", p.Fork(p.SessionId("chat-1"), 2))
        assert records[1:] == source[1:]  # the turns as they were, every record
        assert rig.session.index.turns == 2
        await turn(rig, "Forked?")
        body = fake.requests[0][-1]
        reused = rig.session.last_usage()
        assert reused is not None
        # The request extends the source's turn 2: the slot still held that part of it.
        held = fake.requests[0][2]  # the source's third request (turn 2's)
        assert body["messages"][: len(held["messages"])] == held["messages"]
        assert reused.cache_n > 0
        assert reused.cache_n >= source_tokens(source)
        user = rig.session.records[-4]
        assert isinstance(user, p.UserRecord)
        assert user.note == FORKED.format(session="chat-1", turn=2)
        assert body["messages"][-1]["content"] == f"Forked?\n\n{user.note}"
        await turn(rig, "Again?")
        again = rig.session.records[-4]
        assert isinstance(again, p.UserRecord)
        assert again.note == ""  # only the fork's first turn says it


def source_tokens(records: list[p.LogRecord]) -> int:
    """What the source's turn 2 request processed and reused: its prompt, all of it."""
    usage = [r for r in records if isinstance(r, p.UsageRecord)][-1]
    return usage.cache_n + usage.prompt_n


async def test_a_fork_of_a_later_epoch_and_of_an_earlier_one(tmp_path: Path) -> None:
    home = tmp_path
    source = home / "sessions" / "replay-epochs"
    shutil.copytree(FIXTURES / "replay-epochs", source)
    whole = read_tape(source)
    later = fork_session(home, p.SessionId("replay-epochs"), 4, p.SessionId("late"))
    earlier = fork_session(home, p.SessionId("replay-epochs"), 2, p.SessionId("early"))
    assert (later.epoch, earlier.epoch) == (1, 0)
    late = read_tape(home / "sessions" / "late")
    assert [len(e) for e in late.epochs] == [len(e) for e in whole.epochs]
    early = read_tape(home / "sessions" / "early")
    assert len(early.epochs) == 1
    assert kinds(list(early.epochs[0]))[-1] == "turn_end"
    for name in ("late", "early"):
        await replays_identical(home / "sessions" / name, make_config("", home))


async def test_what_cannot_be_forked_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=list(SCRIPT))
    async with open_rig(tmp_path, fake) as rig:
        await turn(rig, "Echo hi.")
        sid = rig.session.id
    with pytest.raises(CannotFork, match="the session has 1 turns, not 2"):
        fork_session(tmp_path, sid, 2, p.SessionId("f"))
    with pytest.raises(SessionExists):
        fork_session(tmp_path, sid, 1, sid)
    assert sorted(path.name for path in (tmp_path / "sessions").iterdir()) == ["chat-1"]
    assert chat_fork(tmp_path, sid, "two").startswith("/fork takes a turn's number")
    assert chat_fork(tmp_path, sid, "5").startswith("no fork: the session has 1 turns")
    made = chat_fork(tmp_path, sid, "")
    assert isinstance(made, p.SessionId)
    assert made.value.startswith("fork-")


def test_bxctl_fork_makes_the_fork_and_says_how_to_go_on(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "replay-tools", tmp_path / "sessions" / "replay-tools")
    env = {**os.environ, "BOXMAKER_HOME": str(tmp_path), "NO_COLOR": "1"}

    def bxctl(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([BIN / "bxctl", *words], capture_output=True, text=True,
                              timeout=60, env=env)  # fmt: skip

    made = bxctl("fork", "replay-tools", "--at", "2", "--new", "mine")
    assert (made.returncode, made.stderr) == (0, "")
    assert made.stdout == (
        "forked replay-tools at turn 2 as mine; go on with: bxctl chat --session mine\n"
    )
    again = bxctl("fork", "replay-tools", "--at", "9", "--json")
    assert again.returncode == 2
    assert "the session has 3 turns, not 9" in again.stderr
    made = bxctl("fork", "replay-tools", "--at", "1", "--json")
    assert json.loads(made.stdout)["from"] == "replay-tools"
    replayed = bxctl("replay", "mine")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
