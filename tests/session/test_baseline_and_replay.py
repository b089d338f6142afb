"""A session's rules without I/O: the baseline, its budget, and replay only ever extending the
messages (the store's files are `tests/store/test_store.py`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.profiles import load_profile, profile_names
from boxmaker.session import BaselineTooLarge, assemble_baseline, check_budget, messages
from boxmaker.store import Store, core_only, read_baseline
from boxmaker.tools import CORE_TOOLS

from ..strategies import timestamps

SID = p.SessionId("chat-1")
BASELINE = assemble_baseline("You are Boxmaker, in a test.\n", None)


@pytest.mark.parametrize("profile", [None, *profile_names()])
def test_the_baseline_holds_nothing_volatile(tmp_path: Path, profile: str | None) -> None:
    """Two sessions made years apart, under other ids, get the same baseline bytes, with no
    date, time or session id in them: nothing of the moment reaches a request's prefix."""
    (tmp_path / "system.md").write_text("You are Boxmaker.\n")
    (tmp_path / "memory").mkdir(mode=0o700)
    (tmp_path / "memory" / "core.md").write_text("The owner likes tea.\n")
    made = []
    for sid, start in (
        ("chat-a", "2026-11-29T21:31:34.123456Z"),
        ("b-2", "2031-02-03T04:05:06.000000Z"),
    ):
        loaded = load_profile(profile) if profile else None
        baseline = read_baseline(tmp_path / "system.md", core_only(tmp_path)(), loaded)
        clock = TickingClock(start=p.Timestamp.parse(start))
        Store(tmp_path, clock).create(p.SessionId(sid), baseline, "main").close()
        made.append((tmp_path / "sessions" / sid / "0.baseline.json").read_bytes())
    assert made[0] == made[1]
    text = made[0].decode()
    # (A profile's examples may hold a date of their own: the same in every session.)
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    moments = ("2026-11-29", "21:31", "2031-02-03", "04:05", today, "chat-a", "b-2")
    assert [moment for moment in moments if moment in text] == []
    assert "The owner likes tea." in text  # the check reads the text that was made
    assert [t.name for t in CORE_TOOLS] == ["clock", "find_tool", "call_tool", "read_result"]


async def test_budget_check_names_both_numbers() -> None:
    async def count(baseline: p.Baseline) -> int:
        return len(baseline.system)

    assert await check_budget(BASELINE, count, 3000) == len(BASELINE.system)
    with pytest.raises(BaselineTooLarge, match="the baseline is 28 tokens, over the budget of 20"):
        await check_budget(BASELINE, count, 20)


# --- the property: the log only ever extends the messages ------------------------------------

contents = st.text(st.characters(whitelist_categories=("L", "P", "Zs")), max_size=30)
calls = st.lists(
    st.builds(
        p.ToolCall, id=st.text("abcdef", min_size=1, max_size=6), name=contents, arguments=contents
    ),
    max_size=2,
).map(tuple)
records = st.lists(
    st.one_of(
        st.builds(p.UserRecord, time=timestamps, content=contents),
        st.builds(
            p.AssistantRecord,
            time=timestamps,
            content=st.none() | contents,
            reasoning_content=st.none() | contents,
            tool_calls=st.none() | calls,
        ),
        st.builds(p.UsageRecord, time=timestamps),
        st.builds(p.ToolResultRecord, time=timestamps, content=contents, tool_call_id=contents),
        st.builds(p.CacheLossRecord, time=timestamps),
        st.builds(p.TurnEndRecord, time=timestamps),
    ),
    max_size=30,
)


@settings(max_examples=200)
@given(records, st.integers(0, 30))
def test_appending_records_only_extends_the_messages(log: list[p.LogRecord], cut: int) -> None:
    head = p.unstructure(messages(BASELINE, log[:cut]))
    whole = p.unstructure(messages(BASELINE, log))
    assert whole[: len(head)] == head
    encoded = p.dumps(messages(BASELINE, log)).decode()
    for record in log:
        assert str(record.time) not in encoded
        assert str(record.time)[:10] not in encoded  # not even the date
    assert SID.value not in encoded
    # Records that are not messages (usage, cache_loss, turn_end) change no request.
    told = (p.UserRecord, p.AssistantRecord, p.ToolResultRecord)
    assert messages(BASELINE, log) == messages(BASELINE, [r for r in log if isinstance(r, told)])
