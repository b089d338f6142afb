"""Turns of a fenced session: tool blocks in the answer's text run through the same dispatch
and limits as native calls, their results go back as the baseline says, a bad block or an
unknown tool is a failure the model is told about, a block's text never reaches the screen,
and every request still extends the one before."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from boxmaker import proto as p
from boxmaker.loopd.loop import NOT_RUN, TOOLS_OFF, TurnLimit, TurnOutcome, run_turn
from boxmaker.profiles import load_profile
from boxmaker.session import INTERRUPTED
from boxmaker.testing.fake_server import FakeLlamaServer, Reply
from boxmaker.testing.recording import load_recording
from boxmaker.tools import ECHO, definition_hash
from boxmaker.tools.fenced import block_text

from ..helpers import EventLog, Rig, fenced_baseline
from ..helpers import open_rig as native_rig

RECORDINGS = Path(__file__).parents[2] / "recordings"
SMOLLM2 = load_profile("smollm2-135m")
PREFIX, SUFFIX = SMOLLM2.result_prefix, SMOLLM2.result_suffix


def open_rig(home: Path, fake: FakeLlamaServer, config: str = "", **kwargs: Any) -> Any:
    """A rig whose session and client are under the smollm2-135m profile, as loopd's are."""
    kwargs.setdefault("baseline", fenced_baseline())
    return native_rig(home, fake, config, profile=SMOLLM2, **kwargs)


def kinds(records: list[p.LogRecord]) -> list[str]:
    return [p.unstructure(r)["type"] for r in records]


def results(rig: Rig) -> list[p.ToolResultRecord]:
    return [r for r in rig.session.records if isinstance(r, p.ToolResultRecord)]


async def turn(rig: Rig, content: str) -> tuple[EventLog, TurnOutcome]:
    log = EventLog()
    return log, await run_turn(rig.session, rig.runtime, content, log)


def echo(text: str) -> str:
    return block_text("echo", {"text": text})


async def test_a_tool_block_runs_and_its_result_goes_back_as_a_user_message(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content=echo("banana")), Reply(content="banana")])
    async with open_rig(tmp_path, fake) as rig:
        _log, outcome = await turn(rig, "Echo the word banana.")
        assert kinds(rig.session.records) == [
            "session_start", "user", "assistant", "usage", "call_sent", "tool_result",
            "assistant", "usage", "turn_end",
        ]  # fmt: skip
        assistant = rig.session.records[2]
        assert isinstance(assistant, p.AssistantRecord)
        assert (assistant.content, assistant.tool_calls) == (echo("banana"), None)  # as returned
        [result] = results(rig)
        assert (result.call, result.tool_call_id, result.content) == (1, "fenced-1", "banana")
        assert rig.tools.requests == [
            p.ToolRequest(
                rig.session.id,
                1,
                "echo",
                '{"text":"banana"}',
                definition_hash(ECHO),
                turn=1,
                first_turn=1,
                identity=rig.session.identity,
            )
        ]
        assert outcome.content == "banana"
        first, second = fake.requests[0]
        assert "tools" not in first
        assert "tools" not in second
        examples = ["user", "assistant"] * 4  # two whole exchanges: question, block, result, answer
        assert [m["role"] for m in first["messages"]] == ["system", *examples, "user"]
        assert first["messages"][2]["content"] == echo("apple")  # the profile's example
        assert "reasoning_budget_tokens" not in first  # the profile: the model does not reason
        assert second["messages"][: len(first["messages"])] == first["messages"]
        assert second["messages"][-2:] == [
            {"role": "assistant", "content": echo("banana")},
            {"role": "user", "content": PREFIX + "banana" + SUFFIX},
        ]


async def test_a_block_s_text_is_not_shown_and_its_call_is_announced(tmp_path: Path) -> None:
    around = "Let me check. " + block_text("clock", {}) + " One moment."
    fake = FakeLlamaServer(script=[Reply(content=around), Reply(content="It is late.")])
    async with open_rig(tmp_path, fake) as rig:
        log, _ = await turn(rig, "What time is it?")
    shown = log.text()
    assert shown == "Let me check.  One moment.It is late."
    assert "`" not in shown
    assert log.of(p.ToolCallStarted) == [p.ToolCallStarted(name="clock")]
    assert log.of(p.ToolResult) == [p.ToolResult("clock", p.DataClass.PUBLIC, truncated=False)]
    started = log.events.index(p.ToolCallStarted(name="clock"))
    assert all(not isinstance(e, p.Content) or "moment" not in e.text  # type: ignore[attr-defined]
               for e in log.events[started:])  # fmt: skip


@pytest.mark.parametrize(
    ("block", "said"),
    [
        ('```tool\n{"name": "echo", "arguments": {"text": \n```', "(not run: not valid JSON)"),
        (block_text("time", {}), "(not run: no such tool; the tools are clock, echo)"),
        (block_text("call_tool", {"name": "echo"}), "(not run: no such tool;"),
    ],
)
async def test_a_bad_block_or_an_unknown_tool_is_told_once_briefly(
    tmp_path: Path, block: str, said: str
) -> None:
    fake = FakeLlamaServer(script=[Reply(content=block), Reply(content="Sorry.")])
    async with open_rig(tmp_path, fake) as rig:
        log, outcome = await turn(rig, "Hm?")
        [result] = results(rig)
    assert result.content.startswith(said)
    assert len(result.content) < 80  # brief: nothing long for the model to copy
    assert rig.tools.requests == []  # the port never sees it
    assert fake.requests[0][1]["messages"][-1] == {
        "role": "user",
        "content": PREFIX + result.content + SUFFIX,
    }
    assert outcome.content == "Sorry."
    assert len(log.of(p.ToolCallStarted)) == 1
    assert log.of(p.ToolsOff) == []


async def test_a_second_bad_block_ends_tool_use_and_a_plain_answer_ends_the_turn(
    tmp_path: Path,
) -> None:
    bad = '```tool\n{"nam": "clock"}\n```'
    fake = FakeLlamaServer(script=[Reply(content=bad), Reply(content="Oops " + bad),
                                   Reply(content="It is late.")])  # fmt: skip
    async with open_rig(tmp_path, fake) as rig:
        log, outcome = await turn(rig, "Go.")
        records = rig.session.records
    assert outcome.content == "It is late."
    assert [r.content for r in results(rig)] == ["(not run: no tool name)", NOT_RUN]
    [wrap] = [r for r in records if isinstance(r, p.WrapUpRecord)]
    assert (wrap.content, wrap.reason) == (TOOLS_OFF, p.WrapUpReason.BAD_BLOCKS)
    end = records[-1]
    assert isinstance(end, p.TurnEndRecord)
    assert end.outcome is p.Outcome.DONE
    assert log.of(p.ToolsOff) == [p.ToolsOff(p.WrapUpReason.BAD_BLOCKS)]
    assert fake.requests[0][2]["messages"][-1] == {"role": "user", "content": TOOLS_OFF}
    assert "not run" not in log.text()  # loopd's words to the model are not the answer


async def test_a_model_that_only_repeats_its_block_ends_in_an_answer_not_turn_limit(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content=echo("hi"))] * 3)
    async with open_rig(tmp_path, fake) as rig:
        log, outcome = await turn(rig, "Echo hi.")
        end = rig.session.records[-1]
    # The block ran once; its repeat ended tool use; asked plainly, it wrote the block a third
    # time, which is not run and not shown: the answer is empty (a tool's result is never put
    # in the model's mouth).
    assert outcome.content == ""
    assert [r.content for r in results(rig)] == ["hi", NOT_RUN, INTERRUPTED]
    assert log.of(p.ToolsOff) == [p.ToolsOff(p.WrapUpReason.REPEATED_CALL)]
    assert isinstance(end, p.TurnEndRecord)
    assert end.outcome is p.Outcome.DONE
    assert "```" not in log.text()


async def test_too_many_tool_iterations_end_tool_use_in_a_fenced_turn(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content=echo(str(n))) for n in range(4)])
    async with open_rig(tmp_path, fake, "[loop]\ntool_iterations = 2\n") as rig:
        log, outcome = await turn(rig, "Go on.")
        assert [r.content for r in results(rig)] == ["0", "1", NOT_RUN, INTERRUPTED]
    assert log.of(p.ToolsOff) == [p.ToolsOff(p.WrapUpReason.TOOL_ITERATIONS)]
    assert outcome.content == ""


async def test_a_budget_still_stops_a_fenced_turn(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content=echo(str(n))) for n in range(4)])
    async with open_rig(tmp_path, fake, "[loop]\nmax_completions = 2\n") as rig:
        with pytest.raises(TurnLimit, match="max_completions"):
            await turn(rig, "Go on.")


async def test_loopd_s_words_copied_into_an_answer_are_not_shown(tmp_path: Path) -> None:
    copied = f"Tool result: 2026-12-01\n{TOOLS_OFF} (Not Run) It is the first."
    fake = FakeLlamaServer(script=[Reply(content=copied)])
    async with open_rig(tmp_path, fake) as rig:
        log, outcome = await turn(rig, "What day is it?")
        [assistant] = [r for r in rig.session.records if isinstance(r, p.AssistantRecord)]
    assert assistant.content == copied  # the log keeps what the server returned
    assert "Tool result:" not in log.text()
    assert TOOLS_OFF not in log.text()
    assert "not run" not in log.text().casefold()
    assert "2026-12-01" in log.text()
    assert "It is the first." in log.text()
    assert outcome.content == log.text()


async def test_several_blocks_are_calls_in_order_each_with_its_result(tmp_path: Path) -> None:
    both = echo("a") + "\n" + block_text("clock", {}) + "\n" + echo("b")
    fake = FakeLlamaServer(script=[Reply(content=both), Reply(content="Done.")])
    async with open_rig(tmp_path, fake) as rig:
        await turn(rig, "Three.")
        got = [(r.call, r.tool_call_id) for r in results(rig)]
    assert got == [(1, "fenced-1"), (2, "fenced-2"), (3, "fenced-3")]
    assert [r.tool for r in rig.tools.requests] == ["echo", "clock", "echo"]


async def test_a_profile_with_a_tool_role_sends_results_as_tool_messages(tmp_path: Path) -> None:
    baseline = fenced_baseline(results="tool")
    fake = FakeLlamaServer(script=[Reply(content=echo("x")), Reply(content="x")])
    async with open_rig(tmp_path, fake, baseline=baseline) as rig:
        await turn(rig, "Echo x.")
    assert fake.requests[0][1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "fenced-1",
        "content": "x",
    }
    assert baseline.system.endswith("The result comes back as a tool message. Then answer.")


async def test_blocks_left_without_results_are_healed_by_their_ids(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content="Fine.")])
    async with open_rig(tmp_path, fake) as rig:
        rig.replay = False  # its dangling blocks are written by hand
        session = rig.session
        now = rig.runtime.clock.now
        session.append(
            p.UserRecord(now(), "Two things."),
            p.AssistantRecord(now(), echo("a") + block_text("clock", {}), None, None),
            p.UsageRecord(now(), 0, 10, 5, 0, False),
        )  # loopd was killed before it ran them
        await turn(rig, "Again.")
        healed = [(r.tool_call_id, r.content) for r in results(rig)]
        assert healed == [("fenced-1", INTERRUPTED), ("fenced-2", INTERRUPTED)]
        resumed = await rig.reopen()  # the next request is rebuilt from the disk the same way
        assert resumed.request_messages() == session.request_messages()


async def test_the_cache_holds_across_a_fenced_tool_turn(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[
            Reply(content=echo("one")),
            Reply(content="one"),
            Reply(content=echo("two")),
            Reply(content="two"),
        ]
    )
    async with open_rig(tmp_path, fake) as rig:
        await turn(rig, "Echo one.")
        await rig.reopen()
        await turn(rig, "Echo two.")
        usages = [r for r in rig.session.records if isinstance(r, p.UsageRecord)]
    assert "cache_loss" not in kinds(rig.session.records)
    for before, after in itertools.pairwise(usages):
        assert after.cache_n == before.cache_n + before.prompt_n + before.predicted_n - 1


async def test_a_fenced_turn_from_the_recording(tmp_path: Path) -> None:
    recording = load_recording((RECORDINGS / "fenced.http").read_bytes())
    sent: list[dict[str, Any]] = [e.request_body for e in recording.exchanges]  # type: ignore[misc]
    fake = FakeLlamaServer(exchanges=recording.exchanges)
    config = "[inference]\ntemperature = 0.0\nmax_tokens = 64\n"  # as the capture's
    async with open_rig(tmp_path, fake, config) as rig:
        log, outcome = await turn(rig, "Echo the word banana.")
        [result] = results(rig)
    # SmolLM2-135M answered with a block for echo, then, after the result, in a word.
    assert (result.tool_call_id, result.content) == ("fenced-1", "banana")
    assert rig.tools.requests[0].tool == "echo"
    assert outcome.content == "Banana"
    assert "```tool" not in log.text()
    # loopd's requests were those of the capture, but for the system text of this test.
    asked = fake.requests[0]
    for mine, captured in zip(asked, sent, strict=True):
        assert mine["messages"][1:] == captured["messages"][1:]
        assert {k: v for k, v in mine.items() if k != "messages"} == {
            k: v for k, v in captured.items() if k != "messages"
        }
    assert json.loads(json.dumps(asked[1]["messages"][-1]))["content"].startswith(PREFIX)
