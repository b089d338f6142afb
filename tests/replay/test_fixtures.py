"""The golden sessions in `tests/fixtures/sessions/`: each is recorded by the loop itself
(`record_<name>` below, against the fake server, under a ticking clock), and each replays
identical; the sessions from before replay say which input they lack (SPEC section 20).

To record them again after a deliberate change of the log's format:

    BOXMAKER_RECORD_FIXTURES=1 .venv/bin/pytest tests/replay/test_fixtures.py
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker import proto as p
from boxmaker.loopd.loop import TurnError, run_turn
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import NoMemory, Rig, fenced_baseline, make_config, open_rig, replays_identical
from ..loop.test_steer import Box
from ..loop.test_turn import call_tool, turn
from .conversation import TOOLS_SCRIPT, record_tools
from .test_basic import replayed

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sessions"
BEFORE_REPLAY = {"chat-plain", "chat-dangling"}  # kept as they were: logs from before replay
RECORD = bool(os.environ.get("BOXMAKER_RECORD_FIXTURES"))


async def record_epochs(rig: Rig) -> None:
    """Turns past `epoch_at`: a new epoch with a summary, a carried turn."""
    for text in ("one " * 120, "two " * 120, "three " * 120, "four"):
        await turn(rig, text)


EPOCHS_SCRIPT = [
    Reply(content="One."),
    Reply(content="Two."),
    Reply(content="Three."),
    Reply(content="We counted, three times."),  # the summary
    Reply(content="Four."),
]


class Stuck(NoMemory):
    """brokerd taking for ever over every call."""

    async def call(self, request: p.ToolRequest) -> p.ToolResponse:
        await trio.sleep_forever()
        raise AssertionError


async def record_breaks(rig: Rig) -> None:
    """A hard break while a tool runs, a turn its time limit ends while a tool runs, and an
    answer stopped for repeating itself."""
    tools = rig.runtime.port
    rig.runtime = attrs.evolve(rig.runtime, port=Stuck())
    box = Box()
    with trio.move_on_after(5):  # the owner's hard break, five seconds in
        box.hard = True
        await run_turn(rig.session, rig.runtime, "Echo and wait.", lambda _: None, steer=box)
    with pytest.raises(TurnError):
        await turn(rig, "Wait for ever.")  # [loop] max_seconds ends it
    rig.runtime = attrs.evolve(rig.runtime, port=tools)
    await turn(rig, "Say it again and again.")


BREAKS_SCRIPT = [
    Reply(tool_calls=[call_tool("echo", text="x")]),
    Reply(tool_calls=[call_tool("echo", text="y")]),
    Reply(content="I am your creator, you are mine. " * 4 + "And more."),
]


async def record_fenced(rig: Rig) -> None:
    """A fenced session: tool blocks in the text, their results as user messages."""
    await turn(rig, "Echo hi.")
    await turn(rig, "Thanks.")


FENCED_SCRIPT = [
    Reply(content='Let me.\n```tool\n{"name": "echo", "arguments": {"text": "hi"}}\n```'),
    Reply(content="It said hi."),
    Reply(content="You are welcome."),
]

Recorder = Callable[[Rig], Awaitable[None]]
SESSIONS: dict[str, tuple[Recorder, list[Reply], dict[str, object]]] = {
    "replay-tools": (record_tools, TOOLS_SCRIPT, {}),
    "replay-epochs": (record_epochs, EPOCHS_SCRIPT, {"n_ctx": 1200}),
    "replay-fenced": (record_fenced, FENCED_SCRIPT, {"baseline": "fenced"}),
    "replay-breaks": (record_breaks, BREAKS_SCRIPT, {"config": "[loop]\nmax_seconds = 30\n"}),
}


async def record(name: str, home: Path) -> Path:
    recorder, script, options = SESSIONS[name]
    fake = FakeLlamaServer(script=list(script), n_ctx=int(options.get("n_ctx", 1_000_000)))
    baseline = fenced_baseline() if options.get("baseline") == "fenced" else None
    config = str(options.get("config", ""))
    async with open_rig(home, fake, config, session=name, baseline=baseline) as rig:
        await recorder(rig)
        return rig.session.log_path.parent


@pytest.mark.parametrize("name", sorted(SESSIONS))
async def test_a_golden_session_is_what_the_loop_records(
    name: str, tmp_path: Path, autojump_clock: object
) -> None:
    """The loop records each golden session again byte for byte (else the format changed:
    record them again, deliberately)."""
    folder = await record(name, tmp_path)
    kept = FIXTURES / name
    if RECORD:
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(folder, kept, ignore=shutil.ignore_patterns("index.json"))
    made = {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*.json*")}
    made.pop(Path("index.json"), None)
    golden = {path.relative_to(kept): path.read_bytes() for path in kept.rglob("*.json*")}
    assert made == golden


@pytest.mark.parametrize(
    "name", sorted(path.name for path in FIXTURES.iterdir() if path.name not in BEFORE_REPLAY)
)
async def test_every_golden_session_replays_identical(
    name: str, tmp_path: Path, autojump_clock: object
) -> None:
    folder = tmp_path / "sessions" / name
    shutil.copytree(FIXTURES / name, folder)
    await replays_identical(folder, make_config("", tmp_path))


@pytest.mark.parametrize("name", sorted(BEFORE_REPLAY))
async def test_a_golden_session_from_before_replay_says_what_it_lacks(
    name: str, tmp_path: Path
) -> None:
    folder = tmp_path / "sessions" / name
    shutil.copytree(FIXTURES / name, folder)
    report = await replayed(folder)
    assert report.difference is None
    assert report.missing is not None
    assert report.missing.startswith("the turn's settings")
