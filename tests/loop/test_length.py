"""An answer cut at `max_tokens`: the `length` event, and `[loop] wrap_up_on_length`."""

from __future__ import annotations

from pathlib import Path

from boxmaker import proto as p
from boxmaker.loopd.loop import CUT_CALL, WRAP_UP, run_turn
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import EventLog, open_rig

LONG = " ".join(f"w{i}" for i in range(40))  # 40 tokens of the fake's tokenizer
CAPPED = "[inference]\nmax_tokens = 10\n"
WRAPPING = CAPPED + "[loop]\nwrap_up_on_length = true\n"


def kinds(records: list[p.LogRecord]) -> list[str]:
    return [p.unstructure(r)["type"] for r in records]


async def test_an_answer_cut_at_max_tokens_is_reported(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content=LONG)])
    async with open_rig(tmp_path, fake, CAPPED) as rig:
        log = EventLog()
        outcome = await run_turn(rig.session, rig.runtime, "Go on.", log)
        assert log.of(p.Length) == [p.Length(predicted_n=10)]
        assert outcome.content == " ".join(f"w{i}" for i in range(10))
        assert kinds(rig.session.records)[1:] == ["user", "assistant", "usage", "turn_end"]
        assert len(fake.requests[0]) == 1  # no wrap-up unless asked for


async def test_wrap_up_asks_once_for_a_closing_answer_with_the_same_tools(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content=LONG), Reply(content="In short: done.")])
    async with open_rig(tmp_path, fake, WRAPPING) as rig:
        log = EventLog()
        outcome = await run_turn(rig.session, rig.runtime, "Go on.", log)
        assert outcome.content == "In short: done."
        assert log.of(p.Length) == [p.Length(predicted_n=10)]
        assert kinds(rig.session.records)[1:] == [
            "user", "assistant", "usage", "wrap_up", "assistant", "usage", "turn_end",
        ]  # fmt: skip
        cut, closing = fake.requests[0]
        assert closing["tools"] == cut["tools"]
        assert closing["messages"][: len(cut["messages"])] == cut["messages"]  # it extends
        assert closing["messages"][-1] == {"role": "user", "content": WRAP_UP}
        assert rig.session.records[-1].completions == 2  # type: ignore[union-attr]
        await rig.reopen()  # the wrap-up is replayed as it was sent
        assert p.unstructure(rig.session.request_messages()[-2]) == closing["messages"][-1]


async def test_a_cut_completion_s_tool_calls_are_not_run_and_the_closing_one_ends_it(
    tmp_path: Path,
) -> None:
    # 40 tokens of text, the clock call (2), then a call that no longer fits in 45: cut.
    calls = (("clock", "{}"), ("find_tool", '{"query": "anything at all"}'))
    script = [Reply(content=LONG, tool_calls=calls), Reply(content="Ok.", tool_calls=calls[:1]),
              Reply(content="Next.")]  # fmt: skip
    fake = FakeLlamaServer(script=script)
    async with open_rig(tmp_path, fake, "[inference]\nmax_tokens = 45\n[loop]\n"
                        "wrap_up_on_length = true\n") as rig:  # fmt: skip
        log = EventLog()
        outcome = await run_turn(rig.session, rig.runtime, "Go on.", log)
        assert outcome.content == "Ok."
        cut = rig.session.records[2]
        assert [c.name for c in cut.tool_calls] == ["clock"]  # type: ignore[union-attr]
        results = [r for r in rig.session.records if isinstance(r, p.ToolResultRecord)]
        assert results[0].content == CUT_CALL
        assert rig.tools.requests == []  # nothing was run
        assert kinds(rig.session.records)[-2:] == ["tool_result", "turn_end"]  # closed
        assert len(log.of(p.Length)) == 1
        await run_turn(rig.session, rig.runtime, "And?", EventLog())  # the session goes on
