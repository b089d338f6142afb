"""Auto-recall in the turn loop: what memory holds of the user's message, appended after it
as a `recall` record and replayed as a `recall` call and its result, before the turn's first
request; never holding the turn up, never where the session has no `recall`, and taken back
with a message the server refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.loopd.loop import SessionFull, run_turn
from boxmaker.profiles import load_profile
from boxmaker.session import Problem, check_log, profile_baseline, sha256_hex
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply
from boxmaker.tools import CORE_TOOLS, MEMORY_TOOLS, RECALL, block_text

from ..helpers import SYSTEM, EventLog, NoMemory, Rig, make_config, open_rig

FOUND = (
    'Memory holds 1 passage on "sister porto": ...\n- note n1 (2026-12-01): Maria lives in Porto.'
)
WITH_RECALL = p.Baseline(SYSTEM, (*CORE_TOOLS, *MEMORY_TOOLS), memory="")


async def turn(rig: Rig, content: str) -> EventLog:
    log = EventLog()
    await run_turn(rig.session, rig.runtime, content, log)
    return log


def kinds(rig: Rig) -> list[str]:
    return [p.unstructure(r)["type"] for r in rig.session.records]


async def test_what_memory_holds_goes_after_the_message_as_a_recall_call_and_its_result(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(tool_calls=(("clock", "{}"),)), Reply(content="Yes.")])
    async with open_rig(tmp_path, fake, baseline=WITH_RECALL) as rig:
        rig.tools.recall = FOUND
        log = await turn(rig, "Does my sister still live in Porto?")
        assert rig.tools.recalled == [p.RecallFrame(rig.session.id, "sister live porto", 1, 1)]
        assert kinds(rig)[1:4] == ["user", "recall", "assistant"]
        recall = rig.session.records[2]
        assert recall == p.RecallRecord(recall.time, 1, "sister live porto", FOUND,  # type: ignore[union-attr]
                                        p.DataClass.PRIVATE, False)  # fmt: skip
        first = fake.requests[0][0]["messages"]
        assert first[-2:] == [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "recall-1",
             "type": "function", "function": {"name": "recall",
             "arguments": '{"query":"sister live porto"}'}}]},
            {"role": "tool", "tool_call_id": "recall-1", "content": FOUND},
        ]  # fmt: skip
        # The call numbers go on after it; the next request extends the first.
        result = next(r for r in rig.session.records if isinstance(r, p.ToolResultRecord))
        assert result.call == 2
        second = fake.requests[0][1]["messages"]
        assert second[: len(first)] == first
        assert [type(e) for e in log.events[:2]] == [p.ToolCallStarted, p.ToolResult]
        assert log.events[0] == p.ToolCallStarted(name="recall")
        folder = rig.session.log_path.parent
        genesis = sha256_hex((folder / "0.baseline.json").read_bytes())
        checked = check_log(rig.session.log_path.read_bytes(), rig.session.log_path, genesis,
                            None, baseline=rig.session.baseline)  # fmt: skip
        assert not isinstance(checked, Problem), checked  # bxctl verify takes it
        # Resumed from disk, the session gives the same messages and the next call number.
        before = rig.session.request_messages()
        await rig.reopen()
        assert rig.session.request_messages() == before
        assert rig.session.state.next_call == 3


async def test_nothing_is_asked_or_appended_when_there_is_nothing_to_recall(tmp_path: Path) -> None:
    fake = FakeLlamaServer(default=Reply(content="Hi."))
    async with open_rig(tmp_path, fake, baseline=WITH_RECALL) as rig:
        await turn(rig, "hello, thanks!")  # only common words: not even asked
        rig.tools.recall = ""
        await turn(rig, "Tell me about glaciers")  # asked; nothing passed the threshold
        assert [f.query for f in rig.tools.recalled] == ["glaciers"]
        assert "recall" not in kinds(rig)
    async with open_rig(tmp_path / "plain", fake) as rig:  # a session without `recall`
        rig.tools.recall = FOUND
        await turn(rig, "Tell me about glaciers")
        assert rig.tools.recalled == []
    config = make_config("[memory]\nauto_recall = false\n", tmp_path / "off")
    async with open_rig(tmp_path / "off", fake, baseline=WITH_RECALL) as rig:
        rig.runtime = attrs.evolve(rig.runtime, config=config)
        rig.tools.recall = FOUND
        await turn(rig, "Tell me about glaciers")
        assert rig.tools.recalled == []


class Stuck(NoMemory):
    """A brokerd that never answers auto-recall."""

    def __init__(self) -> None:
        self.asked = 0

    async def auto_recall(self, frame: p.RecallFrame) -> p.ToolResponse:
        self.asked += 1
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def call(self, request: p.ToolRequest) -> p.ToolResponse:
        raise AssertionError("no call in this test")


async def test_a_brokerd_that_does_not_answer_holds_the_turn_two_seconds_at_most(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(default=Reply(content="Hi."))
    async with open_rig(tmp_path, fake, baseline=WITH_RECALL) as rig:
        stuck = Stuck()
        rig.runtime = attrs.evolve(rig.runtime, port=stuck)
        start = trio.current_time()
        await turn(rig, "Tell me about glaciers")
        assert stuck.asked == 1
        assert trio.current_time() - start == 2.0
        assert kinds(rig)[1:] == ["user", "assistant", "usage", "turn_end"]


async def test_an_untrusted_recall_taints_the_rest_of_the_epoch(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(tool_calls=(("clock", "{}"),)), Reply(content="ok")])
    async with open_rig(tmp_path, fake, baseline=WITH_RECALL) as rig:
        rig.tools.recall = FOUND
        await turn(rig, "my sister in Porto")
        assert rig.tools.requests[-1].tainted is False
    fake = FakeLlamaServer(script=[Reply(tool_calls=(("clock", "{}"),)), Reply(content="ok")])
    async with open_rig(tmp_path / "t", fake, baseline=WITH_RECALL) as rig:
        rig.runtime = attrs.evolve(rig.runtime, port=Untrusted(rig.tools))
        await turn(rig, "my sister in Porto")
        recall = rig.session.records[2]
        assert isinstance(recall, p.RecallRecord)
        assert recall.untrusted
        assert rig.tools.requests[-1].tainted is True  # the clock call after it


@attrs.define
class Untrusted:
    """FakeTools whose auto-recall carries a passage from an untrusted result."""

    tools: Any

    async def auto_recall(self, frame: p.RecallFrame) -> p.ToolResponse:
        return p.ResultResponse(FOUND, p.DataClass.PRIVATE, untrusted=True, truncated=False)

    async def session_changed(self, session: p.SessionId) -> None:
        pass

    async def call(self, request: p.ToolRequest) -> p.ToolResponse:
        return await self.tools.call(request)  # type: ignore[no-any-return]

    async def approve(self, session: p.SessionId, id: str, answer: p.Answer) -> p.ToolResponse:
        return await self.tools.approve(session, id, answer)  # type: ignore[no-any-return]


async def test_a_message_that_fits_only_without_its_recall_is_sent_without_it(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Fault(FaultKind.CONTEXT_FULL)], default=Reply(content="ok"))
    async with open_rig(tmp_path, fake, baseline=WITH_RECALL) as rig:
        rig.tools.recall = FOUND
        await turn(rig, "Tell me about my sister in Porto")
        assert kinds(rig)[1:] == ["user", "assistant", "usage", "turn_end"]
        with_recall, alone = fake.requests[0]
        assert with_recall["messages"][:-2] == alone["messages"]


async def test_a_message_the_server_refuses_is_taken_back_with_its_recall(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Fault(FaultKind.CONTEXT_FULL)] * 2, default=Reply(content="ok"))
    async with open_rig(tmp_path, fake, baseline=WITH_RECALL) as rig:
        rig.tools.recall = FOUND
        before = rig.session.state.size
        with pytest.raises(SessionFull):  # the message cannot fit: it leaves nothing
            await turn(rig, "Tell me about my sister in Porto")
        assert rig.session.state.size == before
        assert kinds(rig) == ["session_start"]


async def test_a_fenced_session_reads_its_recall_as_a_tool_block_and_its_result(
    tmp_path: Path,
) -> None:
    profile = attrs.evolve(load_profile("smollm2-135m"), only_tools=("clock", "echo", "recall"))
    baseline = profile_baseline(SYSTEM, "", profile, ("recall",))
    fake = FakeLlamaServer(default=Reply(content="She does."))
    async with open_rig(tmp_path, fake, baseline=baseline) as rig:
        rig.tools.recall = FOUND
        await turn(rig, "Does my sister live in Porto?")
        assert baseline.fenced is not None
        said = fake.requests[0][0]["messages"]
        called = block_text(RECALL.name, {"query": "sister live porto"})
        assert said[-2] == {"role": "assistant", "content": called}
        assert said[-1] == {"role": "user", "content": baseline.fenced.prefix + FOUND
                            + baseline.fenced.suffix}  # fmt: skip
