"""The budgets of a turn through `run_turn`: `[loop] max_completions`,
`max_predicted_tokens` and `max_seconds`, each a `turn_limit` naming its key, with what was
recorded kept and the calls of the completion that crossed a budget closed as not run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.loopd.loop import TurnLimit, run_turn
from boxmaker.session import INTERRUPTED
from boxmaker.testing.fake_server import FakeLlamaServer, Reply, Timing

from ..helpers import EventLog, make_config, open_rig

CLOCK = ("clock", "{}")


def kinds(records: Sequence[p.LogRecord]) -> list[str]:
    return [p.unstructure(r)["type"] for r in records]


def end_of(records: Sequence[p.LogRecord]) -> p.TurnEndRecord:
    end = records[-1]
    assert isinstance(end, p.TurnEndRecord)
    return end


async def test_max_completions_stops_before_the_tools_of_the_last_completion(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(default=Reply(tool_calls=(CLOCK,)))
    async with open_rig(tmp_path, fake, "[loop]\nmax_completions = 2\n") as rig:
        with pytest.raises(TurnLimit, match=r"\[loop\] max_completions"):
            await run_turn(rig.session, rig.runtime, "Loop.", EventLog())
        assert kinds(rig.session.records)[1:] == [
            "user", "assistant", "usage", "call_sent", "tool_result",
            "assistant", "usage", "tool_result", "turn_end",  # the last one's call is not sent
        ]  # fmt: skip
        assert rig.session.records[-2].content == INTERRUPTED  # type: ignore[union-attr]
        assert len(rig.tools.requests) == 1  # only the first completion's call ran
        assert end_of(rig.session.records).outcome is p.Outcome.TURN_LIMIT
    assert len(fake.requests[0]) == 2


async def test_max_predicted_tokens_records_the_completion_that_crossed_it_and_runs_none_of_its_calls(  # noqa: E501
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(
        script=[
            Reply(content="Looking.", tool_calls=(CLOCK,)),
            Reply(content="Still looking, at more length.", tool_calls=(CLOCK, CLOCK)),
        ],
        default=Reply(content="Never asked for."),
    )
    async with open_rig(tmp_path, fake, "[loop]\nmax_predicted_tokens = 12\n") as rig:
        with pytest.raises(TurnLimit) as stopped:
            await run_turn(rig.session, rig.runtime, "Look.", EventLog())
        usages = [r for r in rig.session.records if isinstance(r, p.UsageRecord)]
        spent = sum(u.predicted_n for u in usages)
        assert usages[0].predicted_n <= 12 < spent  # the second completion crossed it
        assert str(stopped.value) == (
            f"the turn's completions generated {spent} tokens, over its budget of 12 "
            "([loop] max_predicted_tokens)"
        )
        second = [r for r in rig.session.records if isinstance(r, p.AssistantRecord)][1]
        assert second.content == "Still looking, at more length."  # recorded
        results = [r.content for r in rig.session.records if isinstance(r, p.ToolResultRecord)]
        assert results[1:] == [INTERRUPTED, INTERRUPTED]  # its two calls: not run
        assert len(rig.tools.requests) == 1
        assert end_of(rig.session.records).predicted_n == spent


async def test_max_seconds_is_a_deadline_on_the_whole_turn(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    words = " ".join(f"w{i}" for i in range(100))
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=(CLOCK,)), Reply(content=words), Reply(content="Short.")],
        timing=Timing(ms_per_token=100.0),  # the answer takes 10 s to stream
    )
    async with open_rig(tmp_path, fake, "[loop]\nmax_seconds = 2.5\n") as rig:
        started = trio.current_time()
        log = EventLog()
        with pytest.raises(TurnLimit, match=r"past its budget of 2.5 s \(\[loop\] max_seconds\)"):
            await run_turn(rig.session, rig.runtime, "Talk.", log)
        assert trio.current_time() - started == pytest.approx(2.5)
        assert log.of(p.Content)  # it was cut while the answer streamed
        # Nothing of the cut completion.
        assert kinds(rig.session.records)[1:] == [
            "user", "assistant", "usage", "call_sent", "tool_result", "turn_end",
        ]  # fmt: skip
        end = end_of(rig.session.records)
        assert (end.outcome, end.ms) == (p.Outcome.TURN_LIMIT, 2500)
        outcome = await run_turn(rig.session, rig.runtime, "Shorter.", EventLog())
        assert outcome.content == "Short."  # the session goes on, with a deadline of its own


def test_the_budgets_have_defaults() -> None:
    loop = make_config().loop
    assert (loop.max_completions, loop.max_predicted_tokens, loop.max_seconds) == (
        32, 65536, 3600.0,
    )  # fmt: skip
