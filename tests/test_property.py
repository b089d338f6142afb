"""The property this project exists to prove: every request of a session is a strict extension
of the one before, so the server's prompt cache holds on every request.

Hypothesis generates conversations — user texts; completions with and without tool calls
(clock, find_tool, call_tool with results of random sizes including ones over the cap, unknown
tools, bad arguments, repeats); limits hit; context-full answers; faults that are retried;
breaks at every point (soft breaks' messages taken at step boundaries, hard breaks after any
number of a turn's events, so they land in a stream, a tool call, a write or between steps) —
and drives them through `run_turn` against the scripted fake, dropping the in-memory session
and resuming it from disk between some turns. Then, for the requests the fake recorded:

- each one's message array starts with the one before's, compared as JSON values;
- `tools` and the first message are identical across the session;
- each is exactly the system message plus `messages(baseline, records)` of a prefix of the log;
- the fake's cache model reported no loss (no `cache_loss` in the log), and each completion
  reused the previous one's answer as well as its prompt;
- the log passes `bxctl verify`'s checks (its chain and the order of its records).

The same runs for fenced sessions (the `smollm2-135m` profile: tool blocks in the answer's
text, good ones, bad ones and unknown tools, results sent back as user messages, the example
exchanges after the system message, no `tools` array).

Thinking stays on for a whole conversation: with thinking off, a Qwen3-style template (and the
fake, which models one) renders an empty think block in the generation prompt but not in the
history, so the server cannot reuse the previous answer whatever the loop sends
(`test_loop_turn.py::test_thinking_off_on_a_qwen3_style_template_recomputes_the_previous_answer`).

`make test` runs a derandomized set of examples; `make soak` runs many more at random. A failure
prints the example and the blob that reproduces it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.loop import TurnError, run_turn
from boxmaker.profiles import load_profile
from boxmaker.session import Problem, check_log, request_messages, sha256_hex
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply
from boxmaker.tools.fenced import block_text

from .helpers import Rig, fenced_baseline, open_rig
from .soak import count

CONFIG = "[loop]\ntool_iterations = 3\ntool_result_cap = 96\n[inference]\nmax_attempts = 3\n"

words = st.text(st.characters(whitelist_categories=("L", "N", "Zs", "P")), min_size=1, max_size=24)
echo_texts = st.one_of(words, st.integers(0, 300).map(lambda n: "é" * n))
tool_calls = st.one_of(
    st.just(("clock", "{}")),
    words.map(lambda w: ("find_tool", json.dumps({"query": w}))),
    st.sampled_from([("find_tool", '{"query": "echo"}'), ("find_tool", '{"query": "ECH"}')]),
    echo_texts.map(lambda t: ("call_tool", json.dumps({"name": "echo", "arguments": {"text": t}}))),
    st.sampled_from(
        [
            ("call_tool", '{"name": "weather", "arguments": {}}'),
            ("call_tool", '{"name": "clock", "arguments": {}}'),
            ("echo", '{"text": "direct"}'),
            ("clock", "not json"),
            ("find_tool", "{}"),
        ]
    ),
)
replies = st.one_of(
    st.builds(
        Reply,
        content=st.none() | words,
        reasoning=st.none() | words,
        tool_calls=st.lists(tool_calls, min_size=1, max_size=3).map(tuple),
    ),
    st.builds(Reply, content=words, reasoning=st.none() | words),
)
faults = st.one_of(
    st.integers(0, 6).map(lambda n: Fault(FaultKind.CUT, after=n)),
    st.just(Fault(FaultKind.LOADING)),
    st.just(Fault(FaultKind.CONTEXT_FULL)),
    st.integers(2, 6).map(lambda n: Fault(FaultKind.ERROR_EVENT, after=n)),
)
scripts = st.lists(st.one_of(replies, replies, replies, faults), max_size=14)
softs = st.lists(st.tuples(st.integers(0, 3), words), max_size=3)  # (step boundary, message)
hard_after = st.none() | st.integers(0, 10) | st.integers(11, 40)  # after this many events
# (user text, reopen before it, soft breaks, hard break)
turns = st.lists(st.tuples(words, st.booleans(), softs, hard_after), min_size=1, max_size=6)
Plan = list[tuple[str, bool, list[tuple[int, str]], int | None]]


class Steering:
    """The turn's `Steer`: the soft breaks due at each step boundary, and the flag a hard
    break sets when it cancels the turn, as the daemon's mailbox does."""

    def __init__(self, soft: list[tuple[int, str]]) -> None:
        self.soft = soft
        self.boundary = 0
        self.hard = False

    def take(self) -> list[str]:
        due = [text for at, text in self.soft if at == self.boundary]
        self.boundary += 1
        return due


async def steered_turn(
    rig: Rig, content: str, soft: list[tuple[int, str]], hard: int | None
) -> None:
    steering = Steering(soft)
    events = 0
    with trio.CancelScope() as scope:

        def on_event(_event: object) -> None:
            nonlocal events
            events += 1
            if events == hard:
                steering.hard = True
                scope.cancel()

        if hard == 0:
            steering.hard = True
            scope.cancel()
        with contextlib.suppress(TurnError):  # a limit, a full context, a failure
            await run_turn(rig.session, rig.runtime, content, on_event, steer=steering)


blocks = st.one_of(
    st.just(block_text("clock", {})),
    echo_texts.map(lambda t: block_text("echo", {"text": t})),
    st.sampled_from(
        [
            block_text("time", {}),  # no such tool
            block_text("call_tool", {"name": "echo", "arguments": {"text": "x"}}),
            '```tool\n{"name": "echo", "arguments": {"text": "cut',  # not JSON, not closed
            "```tool\n[1, 2]\n```",
            '```tool\n{"name": "Echo", "arguments": {"text": "case"}}\n```',
        ]
    ),
)
fenced_replies = st.one_of(
    st.builds(
        Reply, content=st.lists(st.one_of(words, blocks), min_size=1, max_size=4).map("".join)
    ),
    st.builds(Reply, content=words),
)
fenced_scripts = st.lists(st.one_of(fenced_replies, fenced_replies, faults), max_size=14)


async def conversation(
    home: Path, script: list[Reply | Fault], plan: Plan, fenced: bool = False
) -> tuple[FakeLlamaServer, list[p.LogRecord], p.Baseline]:
    fake = FakeLlamaServer(script=script, default=Reply(content="Done."), n_ctx=1_000_000)
    chosen = {"baseline": fenced_baseline(), "profile": load_profile("smollm2-135m")}
    async with open_rig(home, fake, CONFIG, **(chosen if fenced else {})) as rig:
        for content, reopen, soft, hard in plan:
            if reopen:
                await rig.reopen()
            await steered_turn(rig, content, soft, hard)
        path = rig.session.log_path
        genesis = sha256_hex(path.with_name("0.baseline.json").read_bytes())
        verdict = check_log(
            path.read_bytes(), path, genesis, rig.session.index, rig.session.baseline
        )
        assert not isinstance(verdict, Problem), verdict
        for record in rig.session.records:
            if isinstance(record, p.BreakRecord):
                count("property: breaks", f"{'hard' if record.hard else 'soft'}, {record.at.value}")
        return fake, list(rig.session.records), rig.session.baseline


def check(fake: FakeLlamaServer, records: list[p.LogRecord], baseline: p.Baseline) -> None:
    bodies: list[dict[str, Any]] = fake.requests.get(0, [])
    if not bodies:  # every turn was broken before its first request went out
        assert not [r for r in records if isinstance(r, p.UsageRecord)]
        return
    replays = {
        json.dumps(p.unstructure(request_messages(baseline, records[:k])), sort_keys=True)
        for k in range(len(records) + 1)
    }
    first = bodies[0]
    for before, after in itertools.pairwise(bodies):
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert after.get("tools") == first.get("tools")
        assert after["messages"][0] == first["messages"][0]
    assert ("tools" in first) == (baseline.fenced is None)
    for body in bodies:
        assert json.dumps(body["messages"], sort_keys=True) in replays
    assert not [r for r in records if isinstance(r, p.CacheLossRecord)]
    # Stronger than cache_outcome: the previous answer is reused too, which holds only when
    # the loop sends back exactly what the server returned (less the end-of-generation token,
    # which the server never keeps).
    usages = [r for r in records if isinstance(r, p.UsageRecord)]
    for before, after in itertools.pairwise(usages):
        kept = before.cache_n + before.prompt_n + before.predicted_n - 1
        assert after.cache_n >= kept, (before, after)


@given(scripts, turns)
def test_every_request_extends_the_one_before(script: list[Reply | Fault], plan: Plan) -> None:
    with tempfile.TemporaryDirectory() as home:
        fake, records, baseline = trio.run(
            conversation,
            Path(home),
            script,
            plan,
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
    check(fake, records, baseline)


@given(fenced_scripts, turns)
def test_every_request_of_a_fenced_session_extends_the_one_before(
    script: list[Reply | Fault], plan: Plan
) -> None:
    with tempfile.TemporaryDirectory() as home:
        fake, records, baseline = trio.run(
            conversation,
            Path(home),
            script,
            plan,
            True,
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
    check(fake, records, baseline)
    calls = [r for r in records if isinstance(r, p.ToolResultRecord)]
    assert all(r.tool_call_id.startswith("fenced-") for r in calls)


words_and_records = st.lists(
    st.one_of(
        words.map(lambda w: p.UserRecord(p.Timestamp.parse("2026-11-29T22:00:00.000000Z"), w)),
        st.builds(
            p.AssistantRecord,
            time=st.just(p.Timestamp.parse("2026-11-29T22:00:01.000000Z")),
            content=st.none() | words,
            reasoning_content=st.none() | words,
            tool_calls=st.none()
            | st.lists(
                st.builds(p.ToolCall, id=words, name=words, arguments=words), max_size=2
            ).map(tuple),
        ),
        st.builds(
            p.ToolResultRecord,
            time=st.just(p.Timestamp.parse("2026-11-29T22:00:02.000000Z")),
            content=words,
            tool_call_id=words,
        ),
        st.builds(p.UsageRecord, time=st.just(p.Timestamp.parse("2026-11-29T22:00:03.000000Z"))),
    ),
    max_size=25,
)


@given(words_and_records)
def test_replay_alone_only_ever_extends(records: list[p.LogRecord]) -> None:
    baseline = p.Baseline(system="You are Boxmaker.", tools=())
    full = p.unstructure(request_messages(baseline, records))
    for k in range(len(records)):
        head = p.unstructure(request_messages(baseline, records[:k]))
        assert full[: len(head)] == head
