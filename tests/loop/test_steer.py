"""Steering a turn through `run_turn`: a soft break's message taken between two
steps, a hard break's record, and the requests around them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.loopd.loop import TurnLimit, run_turn
from boxmaker.session import INTERRUPTED, UNKNOWN_OUTCOME, Problem, check_log, sha256_hex
from boxmaker.testing.fake_server import FakeLlamaServer, Reply, Timing

from ..daemon.test_service import BlockingTools
from ..helpers import EventLog, Rig, deadline, open_rig

CLOCK = ("clock", "{}")


def kinds(records: Sequence[p.LogRecord]) -> list[str]:
    return [p.unstructure(r)["type"] for r in records]


class Box:
    """A `Steer` the test fills: what `take` gives at the next step boundary, and the hard
    flag a hard break sets."""

    def __init__(self) -> None:
        self.waiting: list[str] = []
        self.hard = False
        self.stopped = False
        self.asked = 0

    def take(self) -> Sequence[tuple[str, None, bool]]:
        self.asked += 1
        taken, self.waiting = self.waiting, []
        return [(text, None, False) for text in taken]


def assert_verified(rig: Rig) -> None:
    path = rig.session.log_path
    genesis = sha256_hex(path.with_name("0.baseline.json").read_bytes())
    verdict = check_log(path.read_bytes(), path, genesis, rig.session.index)
    assert not isinstance(verdict, Problem), verdict


def messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["messages"]  # type: ignore[no-any-return]


async def test_a_soft_break_lands_between_two_steps_and_the_next_request_holds_it(
    tmp_path: Path,
) -> None:
    echo = ("call_tool", json.dumps({"name": "echo", "arguments": {"text": "a"}}))
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=(CLOCK,)), Reply(tool_calls=(echo,)), Reply(content="In UTC.")]
    )
    box = Box()
    log = EventLog()

    def on_event(event: object) -> None:
        log(event)
        if event == p.ToolCallStarted("clock"):  # typed while the first tool runs
            box.waiting += ["Say it in UTC.", "And be brief."]

    async with open_rig(tmp_path, fake) as rig:
        outcome = await run_turn(rig.session, rig.runtime, "What time is it?", on_event, steer=box)
        records = rig.session.records
        assert kinds(records)[1:] == [
            "user", "assistant", "usage", "call_sent", "tool_result",
            "break", "user", "break", "user",  # both taken at the first step boundary
            "assistant", "usage", "call_sent", "tool_result",
            "assistant", "usage", "turn_end",
        ]  # fmt: skip
        assert records[6] == p.BreakRecord(records[6].time, hard=False, at=p.BreakAt.STEP)
        assert [r.content for r in records if isinstance(r, p.UserRecord)] == [
            "What time is it?", "Say it in UTC.", "And be brief.",
        ]  # fmt: skip
        end = records[-1]
        assert isinstance(end, p.TurnEndRecord)
        assert (end.outcome, end.completions, end.tool_calls) == (p.Outcome.DONE, 3, 2)
        assert outcome.content == "In UTC."
        assert_verified(rig)
    first, second, third = fake.requests[0]
    assert messages(second)[: len(messages(first))] == messages(first)  # a strict extension
    assert messages(second)[-2:] == [
        {"role": "user", "content": "Say it in UTC."},
        {"role": "user", "content": "And be brief."},
    ]
    assert messages(third)[: len(messages(second))] == messages(second)
    assert box.asked == 2  # at each step boundary, never after the answer
    taken = log.events.index(p.MessageTaken())
    assert log.events[taken - 1] == p.ToolResult("clock", p.DataClass.PUBLIC, False)
    assert log.of(p.MessageTaken) == [p.MessageTaken(), p.MessageTaken()]


async def test_a_message_taken_starts_the_runaway_limits_afresh(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=(CLOCK,)), Reply(tool_calls=(CLOCK,)), Reply(content="Done.")]
    )
    box = Box()
    box.waiting = ["Check the clock again."]  # so the same call is no repeat
    async with open_rig(tmp_path, fake, "[loop]\ntool_iterations = 1\n") as rig:
        outcome = await run_turn(rig.session, rig.runtime, "Time?", EventLog(), steer=box)
        assert outcome.content == "Done."
        results = [r.content for r in rig.session.records if isinstance(r, p.ToolResultRecord)]
        assert len(results) == 2
        assert "already made" not in results[1]  # run again, not answered as a repeat


async def test_a_budget_counts_the_whole_turn_across_taken_messages(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(tool_calls=(CLOCK,)))
    box = Box()
    box.waiting = ["Once more."]
    config = "[loop]\nmax_completions = 2\nrepeat_detection = false\n"
    async with open_rig(tmp_path, fake, config) as rig:
        with pytest.raises(
            TurnLimit, match=r"budget of 2 completions.*\(\[loop\] max_completions\)"
        ):
            await run_turn(rig.session, rig.runtime, "Go.", EventLog(), steer=box)
        assert kinds(rig.session.records).count("assistant") == 2


async def broken_turn(
    rig: Rig, box: Box, content: str, until: Callable[[EventLog], Awaitable[None]]
) -> None:
    """Run a turn until `until(its events)` returns, then break it hard, as the daemon's
    mailbox does: the flag set, the turn's scope cancelled."""
    scope = trio.CancelScope()
    log = EventLog()

    async def run() -> None:
        with scope:
            await run_turn(rig.session, rig.runtime, content, log, steer=box)

    with deadline(60, "the turn's end after its hard break"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await until(log)
            box.hard = True
            scope.cancel()


async def test_a_hard_break_mid_stream_keeps_nothing_of_the_cut_completion(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(
        script=[Reply(content="one two three four five six"), Reply(content="Stopped.")],
        timing=Timing(ms_per_token=100.0),
    )
    box = Box()
    async with open_rig(tmp_path, fake) as rig:

        async def some_text(log: EventLog) -> None:
            await log.wait_for(p.Content)

        await broken_turn(rig, box, "Write an essay.", some_text)
        assert kinds(rig.session.records)[1:] == ["user", "break", "turn_end"]
        cut = rig.session.records[2]
        assert cut == p.BreakRecord(cut.time, hard=True, at=p.BreakAt.COMPLETION)
        end = rig.session.records[3]
        assert isinstance(end, p.TurnEndRecord)
        assert (end.outcome, end.completions) == (p.Outcome.BREAK_HARD, 0)
        outcome = await run_turn(rig.session, rig.runtime, "Stop; say one word.", EventLog())
        assert outcome.content == "Stopped."
        assert_verified(rig)
    assert fake.disconnects == 1
    cut_body, next_body = fake.requests[0]
    assert messages(next_body)[: len(messages(cut_body))] == messages(cut_body)
    assert messages(next_body)[-2:] == [
        {"role": "user", "content": "Write an essay."},
        {"role": "user", "content": "Stop; say one word."},
    ]


async def test_a_hard_break_while_a_tool_runs_closes_its_calls_after_the_break(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(tool_calls=(CLOCK, ("clock", '{"utc": true}')))])
    box = Box()
    port = BlockingTools()  # its calls never end (until cancelled)
    async with open_rig(tmp_path, fake) as rig:
        rig.runtime = attrs.evolve(rig.runtime, port=port)
        await broken_turn(rig, box, "Time twice.", lambda _log: port.started.wait())
        assert kinds(rig.session.records)[1:] == [
            "user", "assistant", "usage", "call_sent", "break", "tool_result", "tool_result",
            "turn_end",
        ]  # fmt: skip
        cut = rig.session.records[5]
        assert cut == p.BreakRecord(cut.time, hard=True, at=p.BreakAt.TOOL)
        closing = [r for r in rig.session.records if isinstance(r, p.ToolResultRecord)]
        # The first call was sent when the break came: its outcome is unknown; the second
        # was never sent.
        assert [r.content for r in closing] == [UNKNOWN_OUTCOME, INTERRUPTED]
        assert_verified(rig)
