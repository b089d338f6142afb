"""Replay: a recorded session runs again byte for byte, and a changed byte of its log (or a
changed rule of the loop) is reported at the first record it changes (SPEC section 20)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from boxmaker import proto as p
from boxmaker.loopd.loop import run_turn
from boxmaker.loopd.replay import Tape, read_tape, replay, select_runs
from boxmaker.session import Link, seal
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import Rig, make_config, open_rig
from ..loop.test_steer import Box
from ..loop.test_turn import Answering, call_tool, turn
from .conversation import TOOLS_SCRIPT, record_tools

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sessions"


async def replayed(folder: Path, config_text: str = "", **kwargs: Any) -> Any:
    tape = read_tape(folder)
    own = bool(config_text)
    config = make_config(config_text, folder.parent.parent)
    return await replay(folder, select_runs(tape, **kwargs), tape, config, own_config=own)


def rewrite(folder: Path, change: Callable[[list[p.LogRecord]], list[p.LogRecord]]) -> None:
    """Change epoch 0's records and write its log again, its chain sealed anew (as a log
    written that way would be)."""
    log = folder / "0.jsonl"
    genesis = hashlib.sha256((folder / "0.baseline.json").read_bytes()).hexdigest()
    records = change(list(read_tape(folder).epochs[0]))
    link, lines = Link(0, genesis), []
    for record in records:
        line, link = seal(p.dumps(record), link)
        lines.append(line)
    log.write_bytes(b"".join(lines))


async def recorded(tmp_path: Path) -> tuple[Path, Rig]:
    """A session of three turns: a tool call, an approval, and a soft break."""
    async with open_rig(tmp_path, FakeLlamaServer(script=list(TOOLS_SCRIPT))) as rig:
        await record_tools(rig)
        return rig.session.log_path.parent, rig


async def test_a_session_replays_identical_and_each_turn_alone_too(tmp_path: Path) -> None:
    folder, _ = await recorded(tmp_path)
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    report = await replayed(folder)
    assert report.identical, report
    # Every line is compared but the first (the session's start, which the copy keeps).
    assert (report.runs, report.lines) == (3, len(read_tape(folder).lines[0]) - 1)
    for turn_number in (1, 2, 3):
        alone = await replayed(folder, turn=turn_number)
        assert (alone.identical, alone.runs) == (True, 1), alone
    assert (await replayed(folder, since=2)).runs == 2
    after = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    assert after == before  # the recorded session is never written


async def answered(folder: Path, change: Change, config_text: str = "") -> Any:
    """Replay with the world's answers changed by `change` (the model answered otherwise, a
    tool said something else, the owner said no...), compared with the log as recorded."""
    tape = read_tape(folder)
    answers = Tape([change(list(tape.epochs[0])), *tape.epochs[1:]], tape.lines)
    config = make_config(config_text, folder.parent.parent)
    own = bool(config_text)
    return await replay(folder, select_runs(answers), answers, config, own_config=own)


Change = Callable[[list[p.LogRecord]], list[p.LogRecord]]


def _at(records: list[p.LogRecord], kind: type, nth: int = 0) -> int:
    return [i for i, r in enumerate(records) if isinstance(r, kind)][nth]


def _completion(records: list[p.LogRecord]) -> list[p.LogRecord]:
    at = _at(records, p.AssistantRecord, 1)
    records[at] = attrs.evolve(records[at], content="Said hi!")
    return records


def _result(records: list[p.LogRecord]) -> list[p.LogRecord]:
    at = _at(records, p.ToolResultRecord)
    records[at] = attrs.evolve(records[at], content="hi!")
    return records


def _approval(records: list[p.LogRecord]) -> list[p.LogRecord]:
    at = _at(records, p.ApprovalRecord)
    records[at] = attrs.evolve(records[at], answer=p.Answer.DENY)
    return records


def _break(records: list[p.LogRecord]) -> list[p.LogRecord]:
    """The soft break taken a step later: after the second echo's result, not the first's."""
    at = _at(records, p.BreakRecord)
    moved = records[at : at + 2]
    del records[at : at + 2]
    after = _at(records, p.ToolResultRecord, 3) + 1
    records[after:after] = moved
    return records


@pytest.mark.parametrize(
    ("change", "kind", "field", "nth"),
    [
        (_completion, p.AssistantRecord, "content", 1),  # the model said something else
        (_result, p.ToolResultRecord, "content", 0),  # the tool said something else
        (_approval, p.ApprovalRecord, "answer", 0),  # the owner said no
        (_break, p.BreakRecord, "type", 0),  # the message came a step later
    ],
)
async def test_a_changed_answer_is_reported_at_the_record_it_changes(
    tmp_path: Path, change: Change, kind: type, field: str, nth: int
) -> None:
    folder, _ = await recorded(tmp_path)
    records = list(read_tape(folder).epochs[0])
    report = await answered(folder, change)
    found = report.difference
    assert found is not None, report
    assert found.recorded_at == (0, _at(records, kind, nth)), found
    assert found.field == field, found
    assert found.record == p.unstructure(records[found.recorded_at[1]])["type"]


async def test_a_changed_rule_is_reported_at_the_first_record_it_changes(tmp_path: Path) -> None:
    folder, _ = await recorded(tmp_path)
    records = list(read_tape(folder).epochs[0])
    # tool_result_cap at its least: the echo's result is cut where it was whole.
    report = await replayed(folder, "[loop]\ntool_result_cap = 64\n")
    assert report.identical, report  # "hi" fits in 64 bytes: nothing changes
    report = await replayed(folder, "[loop]\ntool_iterations = 1\nmax_completions = 1\n")
    found = report.difference
    assert found is not None, report
    # One completion a turn: the first turn's tool call is never sent.
    assert found.recorded_at == (0, _at(records, p.CallSentRecord)), found
    assert found.replayed is not None
    assert b'"call_sent"' not in found.replayed


async def test_a_log_from_before_replay_says_which_input_it_lacks(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "chat-plain"
    shutil.copytree(FIXTURES / "chat-plain", folder)
    report = await replayed(folder)
    assert not report.identical
    assert report.difference is None
    assert report.missing_at == (0, 1)  # its first turn's message
    assert report.missing.startswith("the turn's settings (the server's context size")


async def test_two_runs_of_one_conversation_write_the_same_bytes(
    tmp_path: Path, autojump_clock: object
) -> None:
    """Under a mock clock, the same scripted conversation (fake server, fake tools) writes the
    same bytes, every file of the session's folder."""
    logs = []
    for run in ("a", "b"):
        folder, _ = await recorded(tmp_path / run)
        logs.append({path.relative_to(folder): path.read_bytes() for path in folder.rglob("*")
                     if path.is_file()})  # fmt: skip
    assert logs[0] == logs[1]


async def test_a_whole_result_changed_on_disk_since_is_a_missing_input(tmp_path: Path) -> None:
    long = "line of output\n" * 40
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=[call_tool("echo", text=long)]), Reply(content="Long.")]
    )
    async with open_rig(tmp_path, fake, "[loop]\ntool_result_cap = 100\n") as rig:
        await turn(rig, "Echo a lot.")
        folder = rig.session.log_path.parent
    whole = folder / "results" / "1.txt"
    assert whole.read_text().startswith("line of output")
    assert (await replayed(folder)).identical
    whole.write_text(whole.read_text().replace("output", "OUTPUT", 1))
    report = await replayed(folder)
    assert report.difference is None
    assert report.missing is not None
    assert report.missing.startswith("call 1's whole result (")
    assert report.missing.endswith("was changed since)")


async def test_a_message_refused_for_its_size_and_sent_again_in_a_new_epoch_replays(
    tmp_path: Path, autojump_clock: object
) -> None:
    """The server's refusal is an input: the message's `settings.refused` says what it
    named, so replay refuses it too, at the same place, and the same epoch opens."""
    long = " ".join(f"w{i}" for i in range(800))
    fake = FakeLlamaServer(
        script=[
            Reply(tool_calls=[("clock", "{}")]),
            Reply(content="The clock said a lot."),  # the summary
            Reply(content="Yes."),
        ],
        n_ctx=1300,
    )
    async with open_rig(tmp_path, fake) as rig:
        tools = rig.runtime.port
        long_result = p.ResultResponse(long, p.DataClass.PUBLIC, untrusted=False, truncated=False)
        rig.runtime = attrs.evolve(rig.runtime, port=Answering(long_result))
        box = Box()
        with trio.CancelScope() as scope:

            def on_event(event: object) -> None:
                if isinstance(event, p.ToolResult):  # the result is in: break before the answer
                    box.hard = True
                    scope.cancel()

            await run_turn(rig.session, rig.runtime, "What time is it?", on_event, steer=box)
        rig.runtime = attrs.evolve(rig.runtime, port=tools)
        _, outcome = await turn(rig, "Still there?")
        assert outcome.content == "Yes."
        assert rig.session.epoch == 1
        user = rig.session.records[-4]
        assert isinstance(user, p.UserRecord)
        assert user.settings is not None
        assert user.settings.refused is not None
        assert user.settings.refused.n_ctx == 1300
        folder = rig.session.log_path.parent
    assert (await replayed(folder)).identical  # and the rig's own replay, as it closed
