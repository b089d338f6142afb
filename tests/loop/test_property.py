"""The property this project exists to prove: every request of a session is a strict extension
of the one before, so the server's prompt cache holds on every request — within each epoch.

Hypothesis generates conversations — user texts (some too long for the context); completions
with and without tool calls (clock, find_tool, call_tool with results of random sizes including
ones over the cap, unknown tools, bad arguments, repeats); limits hit; context-full answers;
faults that are retried; fresh epochs asked for; breaks at every point (soft breaks' messages
taken at step boundaries, hard breaks after any number of a turn's events, so they land in a
stream, a tool call, a write, a summary or between steps) — and drives them through `run_turn`
against the scripted fake, whose context is sometimes small enough that the conversation
crosses epochs, dropping the in-memory session and resuming it from disk between some turns.
Then, for the requests the fake recorded:

- each is the system message plus `messages(baseline, records)` of a prefix of one epoch's log
  (or, refused for its size, such a prefix and the user message that was then taken back);
- each accepted one's message array starts with the one before's within an epoch, compared
  as JSON values, and the epochs only ever go forward;
- a summary request is the epoch's conversation before its carried turns, a prefix of the
  request before it, then the fixed instruction (unless a refusal had it cut down), and its
  completion processed only the instruction;
- `tools` are identical across the session, across epochs too, and in brokerd's run while an
  MCP server connects, changes its list and goes away between turns (its tools found and
  called through `call_tool`); the first message is the epoch's own baseline's, identical
  within the epoch, while in brokerd's run the owner makes notes, pins and withdraws them and
  writes `core.md` and switches the session's mode between turns (issue 47), the model calls
  `remember`, `forget` and `recall`, and
  auto-recall appends what memory holds before each turn's first request (issue 31);
- the fake's cache model reported no loss (no `cache_loss` in any log, the first request of a
  new epoch included, but after a switch that failed once the server had read its summary
  request), and within an epoch each completion reused the previous one's answer as well as
  its prompt;
- every epoch's log passes `bxctl verify --all`'s checks (its chain, its layout and the order
  of its records, the turns it carried).

The same runs for fenced sessions (the `smollm2-135m` profile: tool blocks in the answer's
text, good ones, bad ones and unknown tools, results sent back as user messages, the example
exchanges after the system message, no `tools` array).

Thinking stays on for a whole conversation: with thinking off, a Qwen3-style template (and the
fake, which models one) renders an empty think block in the generation prompt but not in the
history, so the server cannot reuse the previous answer whatever the loop sends
(`tests/loop/test_turn.py::test_thinking_off_on_a_qwen3_style_template_recomputes_the_previous_answer`).

`make test` runs a derandomized set of examples; `make soak` runs many more at random. A failure
prints the example and the blob that reproduces it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import event, given
from hypothesis import strategies as st

from boxmaker import layout
from boxmaker import proto as p
from boxmaker.attached import shown_text
from boxmaker.brokerd import SHIPPED_POLICY, Broker, builtin_registry, parse_policy
from boxmaker.brokerd.registry import McpTool
from boxmaker.config import DEFAULT_CORE
from boxmaker.loopd.loop import Carried, TurnError, run_turn
from boxmaker.memory import NotesFile, memory_reader, remembered, withdrawn
from boxmaker.profiles import load_profile
from boxmaker.session import (
    MERGE_INSTRUCTION,
    SUMMARY_INSTRUCTION,
    Problem,
    assemble_baseline,
    header,
    request_messages,
    secret,
    tainted,
)
from boxmaker.store import check_epochs, keep_upload
from boxmaker.testing._render import tokenize
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply
from boxmaker.tools import session_tools
from boxmaker.tools.fenced import block_text

from ..helpers import SYSTEM, Rig, fenced_baseline, open_rig, read_epochs
from ..soak import count

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
LONG = "long " * 400  # more than the smaller contexts hold
softs = st.lists(st.tuples(st.integers(0, 3), words), max_size=3)  # (step boundary, message)
hard_after = st.none() | st.integers(0, 10) | st.integers(11, 40)  # after this many events
# (user text, reopen before it, ask for a new epoch, soft breaks, hard break)
turns = st.lists(
    st.tuples(
        st.one_of(words, words, words, st.just(LONG)),
        st.booleans(),
        st.booleans(),
        softs,
        st.none() | st.none() | hard_after,
    ),
    min_size=1,
    max_size=8,
)
Plan = list[tuple[str, bool, bool, list[tuple[int, str]], int | None]]
contexts = st.sampled_from([1_000_000, 1_400, 1_000, 700])  # the fake's n_ctx; its baseline 556
INSTRUCTION = {"role": "user", "content": SUMMARY_INSTRUCTION}


class Steering:
    """The turn's `Steer`: the soft breaks due at each step boundary, and the flag a hard
    break sets when it cancels the turn, as the daemon's mailbox does."""

    def __init__(self, soft: list[tuple[int, str]]) -> None:
        self.soft = soft
        self.boundary = 0
        self.hard = False
        self.stopped = False

    def take(self) -> list[tuple[str, None, bool]]:
        due = [(text, None, False) for at, text in self.soft if at == self.boundary]
        self.boundary += 1
        return due


async def steered_turn(
    rig: Rig,
    content: str,
    new_epoch: bool,
    soft: list[tuple[int, str]],
    hard: int | None,
    carried: Carried | None = None,
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
            await run_turn(rig.session, rig.runtime, content, on_event, steer=steering,
                           new_epoch=new_epoch, carried=carried)  # fmt: skip


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


# brokerd's own tools, run by a real `Broker` in process (its file tools in the event loop,
# so the fake clock jumps only when the conversation waits): files that exist and do not,
# escapes, a bad pattern, writes and edits, and `echo` under `ask` (nobody can be asked).
ECHO_ASKS = SHIPPED_POLICY.replace(
    '[grants.echo]\ndecision = "allow"', '[grants.echo]\ndecision = "ask"'
)
# A secret root in the workspace: reading it makes the conversation secret (issue 41).
VAULT = '\n[roots.vault]\npath = "{vault}"\nclass = "secret"\n'
broker_calls = st.one_of(
    st.sampled_from([
        ("read_file", '{"path": "notes.md"}'),
        ("read_file", '{"path": "big.txt", "offset": 3, "limit": 40}'),
        ("read_file", '{"path": "../outside.md"}'),
        ("read_file", '{"path": "missing.md"}'),
        ("read_file", '{"path": 5}'),
        ("list_dir", '{"path": "."}'),
        ("search_files", '{"pattern": "tea|line 3"}'),
        ("search_files", '{"pattern": "("}'),
        ("edit_file", '{"path": "notes.md", "old": "tea", "new": "coffee"}'),
        ("call_tool", '{"name": "echo", "arguments": {"text": "asks"}}'),
        ("call_tool", '{"name": "list_dir", "arguments": {"path": "sub"}}'),
        ("call_tool", '{"name": "notes.lookup", "arguments": {"q": "tea"}}'),
        ("find_tool", '{"query": "lookup notes"}'),
        ("clock", "{}"),
    ]),
    words.map(lambda w: ("write_file", json.dumps({"path": "out.md", "content": w}))),
    st.just(("read_file", '{"path": "vault/key.txt"}')),  # a secret read
    words.map(lambda w: ("find_tool", json.dumps({"query": w}))),
    st.sampled_from([
        ("remember", '{"text": "tea at four", "pin": true}'),
        ("recall", '{"query": "tea notes"}'),
        ("remember", '{"text": "the notes are in notes.md"}'),
        ("forget", '{"id": "n1"}'),
    ]),
)  # fmt: skip
broker_calling = st.builds(
    Reply,
    content=st.none() | words,
    reasoning=st.none() | words,
    tool_calls=st.lists(broker_calls, min_size=1, max_size=3).map(tuple),
)
broker_replies = st.one_of(broker_calling, broker_calling, st.builds(Reply, content=words))
broker_scripts = st.lists(
    st.one_of(broker_replies, broker_replies, faults), min_size=1, max_size=14
)
broker_contexts = st.sampled_from([1_000_000, 2_800, 2_300])  # its baseline: about 1,730


# Between turns, the owner changes memory (issue 31): a note made, pinned or not, one
# withdrawn, `core.md` written; the model's calls do too (`broker_calls`). None of it may
# change a request of the epoch that is running; a new epoch's baseline holds it.
# The owner's mode switches before each turn (None: none): a switch costs no cache (SPEC 21).
mode_steps = st.lists(st.none() | st.sampled_from(list(p.Mode)), max_size=8)
# A file the owner attaches to a turn's message (None: none): a text, whose text goes at the end
# of that message, or an image (an image part after it: the fake server takes images); the
# turn's words are data from it on (SPEC section 22).
attach_steps = st.lists(
    st.none() | st.tuples(st.sampled_from(["text", "image"]), words), max_size=8
)
PNG = b"\x89PNG\r\n\x1a\n"


def attached(home: Path, kind: str, text: str) -> Carried:
    """A file attached as `attach` leaves it (in `<home>/uploads/`), as `carry` takes it."""
    data = PNG + text.encode() if kind == "image" else text.encode()
    sha = hashlib.sha256(data).hexdigest()
    keep_upload(home, sha, data, None)
    if kind == "image":
        file = p.TurnFile("dot.png", "image/png", len(data), sha)
        return Carried((file,), "", ((sha, layout.upload_file(home, sha)),))
    file = p.TurnFile("notes.txt", "text/plain", len(data), sha)
    shown = shown_text(file.name, file.media_type, text)
    return Carried((file,), shown, ((sha, layout.upload_file(home, sha)),))


def named(message: Any) -> Any:
    """A request's message with each image's data URL as the log names it (by its hash)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return message
    parts = []
    for part in content:
        url = part.get("image_url", {}).get("url", "") if part.get("type") == "image_url" else ""
        if url.startswith("data:") and ";base64," in url:
            head, data = url.split(";base64,", 1)
            sha = hashlib.sha256(base64.b64decode(data)).hexdigest()
            part = {"type": "image_url", "image_url": {"url": f"{head};sha256,{sha}"}}
        parts.append(part)
    return {**message, "content": parts}


MemoryStep = tuple[str, str] | None
memory_steps = st.lists(
    st.one_of(
        st.none(),
        st.tuples(st.sampled_from(["note", "pin", "core"]), words),
        st.tuples(st.just("forget"), st.sampled_from(["n1", "n2", "n3"])),
    ),
    max_size=8,
)
NOTE_TIME = p.Timestamp.parse("2026-12-04T10:00:00.000000Z")


def memory_changes(home: Path, steps: list[MemoryStep]) -> None:
    """The owner's changes to memory before a turn, as `bxctl memory` makes them."""
    notes = NotesFile(home)
    for step in steps:
        match step:
            case ("note" | "pin" as kind, text):
                notes.append(lambda held, t=text, k=kind: remembered(held, t, k == "pin",
                                                                      NOTE_TIME))  # fmt: skip
            case ("forget", id):
                notes.append(lambda held, i=id: withdrawn(held, i, NOTE_TIME))
            case ("core", text):
                (home / "memory").mkdir(mode=0o700, exist_ok=True)
                (home / "memory" / "core.md").write_text(text)


def mcp_servers_change(broker: Broker, turn: int, said: str) -> None:
    """Between turns, an MCP server of the in-process brokerd connects (its tools named from
    the turn's words), changes its list, or disconnects: only brokerd's registry changes, and
    no request of the session may change for it (issue 30)."""
    match turn % 3:
        case 0:
            names = ["lookup", *(w for w in re.findall(r"[a-z]{1,20}", said.casefold())[:3])]
        case 1:
            names = ["lookup", f"changed{turn}"]
        case _:
            names = []  # it went away
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    tools = [McpTool(p.ToolSchema(f"notes.{name}", f"{name} in the notes ({turn})", schema),
                     name, read_only=False) for name in dict.fromkeys(names)]  # fmt: skip
    broker.update_tools("notes", tools)


def brokerd_in(home: Path, clock: Any) -> Broker:
    workspace = home / "workspace"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "notes.md").write_text("tea at four\n")
    (workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(200)))
    (home / "outside.md").write_text("not the agent's\n")
    (workspace / "vault").mkdir()
    (workspace / "vault" / "key.txt").write_text("the vault's key is owl-7\n")
    policy = parse_policy(ECHO_ASKS + VAULT.format(vault=workspace / "vault"), home / "policy.toml")
    return Broker(builtin_registry(DEFAULT_CORE), policy, workspace, home, clock, threads=False)


async def conversation(
    home: Path,
    script: list[Reply | Fault],
    plan: Plan,
    n_ctx: int,
    fenced: bool = False,
    brokerd: bool = False,
    memory: list[MemoryStep] | None = None,
    modes: list[p.Mode | None] | None = None,
    attaching: list[tuple[str, str] | None] | None = None,
) -> tuple[FakeLlamaServer, list[list[p.LogRecord]], list[p.Baseline]]:
    fake = FakeLlamaServer(
        script=script, default=Reply(content="Done."), n_ctx=n_ctx, vision=brokerd
    )
    chosen: dict[str, Any] = {}
    if fenced:
        chosen = {"baseline": fenced_baseline(), "profile": load_profile("smollm2-135m")}
    if brokerd:
        chosen = {"baseline": assemble_baseline(SYSTEM, None, session_tools(DEFAULT_CORE)),
                  "memory": memory_reader(home, 256, lambda _said: None)}  # fmt: skip
    async with open_rig(home, fake, CONFIG, **chosen) as rig:
        if brokerd:
            rig.runtime = attrs.evolve(rig.runtime, port=brokerd_in(home, rig.runtime.clock))
        for turn, (content, reopen, new_epoch, soft, hard) in enumerate(plan):
            if reopen:
                await rig.reopen()
            if brokerd:
                broker = rig.runtime.port
                assert isinstance(broker, Broker)
                mcp_servers_change(broker, turn, content)
                memory_changes(home, (memory or [])[turn : turn + 1])
                mode = (modes or [])[turn : turn + 1]
                if mode and mode[0] is not None:  # the owner's `/mode`, between turns (acts.py)
                    rig.session.append(p.ModeRecord(rig.runtime.clock.now(), mode[0]))
            step = (attaching or [])[turn : turn + 1]
            carried = attached(home, *step[0]) if step and step[0] is not None else None
            await steered_turn(rig, content, new_epoch, soft, hard, carried)
            if brokerd:  # as loopd tells brokerd after each turn, read in the background
                broker.memory.index.update_session(rig.session.id.value)
                broker.memory.index.close()
        folder = rig.store.folder(rig.session.id)
    verdict = check_epochs(folder, every=True)  # the chains, the layouts, the order, the ends
    assert not isinstance(verdict, Problem), verdict
    epochs = read_epochs(folder)
    for records in epochs:
        for record in records[header(records).own_from :]:
            if isinstance(record, p.BreakRecord):
                count("property: breaks", f"{'hard' if record.hard else 'soft'}, {record.at.value}")
            if brokerd and isinstance(record, p.ToolResultRecord) and "notes." in record.content:
                count("property: an MCP server's tools", "found" if "[{" in record.content
                      else "called, the server gone")  # fmt: skip
    baselines = [p.loads(p.Baseline, (folder / f"{n}.baseline.json").read_bytes())
                 for n in range(len(epochs))]  # fmt: skip
    for before, after in itertools.pairwise(epochs):  # where the words came from, carried on
        end = before[-1]
        assert isinstance(end, p.EpochEndRecord)
        for kind, fold in (("tainted", tainted), ("secret", secret)):
            held = fold(before)
            assert getattr(end, kind) == held, (kind, end)
            if end.summary is not None:
                opening = [r for r in after if isinstance(r, p.SummaryRecord)]
                assert getattr(opening[-1], kind) == held, (kind, opening[-1])
                if held:
                    count("property: provenance", f"an epoch opened {kind}")
                    assert fold(after)  # and the epoch it opens holds it
    if brokerd:
        for number, (records, made) in enumerate(zip(epochs, baselines, strict=True)):
            if number and made.memory:
                count("property: memory", "a new epoch's baseline holding memory")
            calls: dict[str, str] = {}
            for record in records[header(records).own_from :]:
                if isinstance(record, p.RecallRecord):
                    count("property: memory", "an auto-recall appended")
                if isinstance(record, p.AssistantRecord):
                    calls = {call.id: call.name for call in record.tool_calls or ()}
                tool = calls.get(getattr(record, "tool_call_id", ""), "")
                if isinstance(record, p.ToolResultRecord) and tool in ("remember", "forget",
                                                                       "recall"):  # fmt: skip
                    said = " ".join(record.content.split()[:3])
                    count("property: memory", f"{tool}: {said}")
    return fake, epochs, baselines


def key(messages: Any) -> str:
    return json.dumps(p.unstructure(messages) if not isinstance(messages, list) else messages,
                      sort_keys=True)  # fmt: skip


def without_recall(said: list[Any]) -> list[Any]:
    """A request's messages without the auto-recall at their end (its call and result)."""
    calls = said[-2].get("tool_calls") or [] if len(said) > 1 else []
    if len(calls) == 1 and calls[0]["id"].startswith("recall-"):
        return said[:-2]
    return said


def check(
    fake: FakeLlamaServer, epochs: list[list[p.LogRecord]], baselines: list[p.Baseline]
) -> None:
    baseline = baselines[-1]  # the tools, the fenced examples: the same in every epoch
    bodies: list[dict[str, Any]] = [  # each image as the log names it (its bytes aside)
        {**body, "messages": [named(m) for m in body["messages"]]}
        for body in fake.requests.get(0, [])
    ]
    statuses = fake.statuses.get(0, [])
    if not bodies:  # every turn was broken before its first request went out
        assert not [r for records in epochs for r in records if isinstance(r, p.UsageRecord)]
        return
    # Every prefix of each epoch's log, as the request it gives -> the epochs that give it
    # (two epochs can open alike: the same summary, the same turns carried).
    replays: dict[str, set[int]] = {}
    for number, records in enumerate(epochs):
        for k in range(len(records) + 1):
            made = request_messages(baselines[number], records[:k])
            replays.setdefault(key(made), set()).add(number)
    first = bodies[0]
    # Each epoch's system message: its own baseline's (the memory of its day), never changed
    # within the epoch.
    systems = [{"role": "system", "content": b.system} for b in baselines]
    previous: list[Any] = []  # the messages of the last request the server accepted,
    epoch = 0  # and its epoch
    # epoch -> whether its last accepted summary request asked what the slot held: not cut
    # down, and the first the server read since the conversation's last request
    summaries: dict[int, bool] = {}
    closes, cut_down = 0, False
    asked_since = False  # a summary request the server read since the last accepted request
    excused = 0  # requests after a switch that failed there: the slot held its summary request
    # The latest epoch each accepted request can belong to: while a later one can only be in
    # this epoch or before, this epoch is not left yet (a message whose stream was cut, then
    # refused and taken back, can read like a later epoch's first request).
    later = [max(found) for b, s in zip(bodies, statuses, strict=True)
             if s == 200 and (found := replays.get(key(b["messages"])))]  # fmt: skip
    accepted = 0
    for at, (body, status) in enumerate(zip(bodies, statuses, strict=True)):
        said = body["messages"]
        assert body.get("tools") == first.get("tools")
        assert said[0] in systems
        if str(said[-1]["content"]).startswith(MERGE_INSTRUCTION):  # summaries made one level up
            assert len(said) == 2 + len(baseline.fenced.examples if baseline.fenced else ())
            asked_since = asked_since or status == 200
            continue
        if said[-1] == INSTRUCTION:  # a summary request
            # Thinking off (a fenced session's profile, SmolLM2's, sends no thinking fields).
            off = None if baseline.fenced else {"enable_thinking": False}
            assert body.get("chat_template_kwargs") == off
            asked = said[:-1]
            before = bodies[at - 1] if at else {"messages": [{}]}
            if before["messages"][-1] == INSTRUCTION and before is not body:
                # Cut down after a refusal, or the retry of a request that was (same body).
                cut_down = statuses[at - 1] == 400 or (before == body and cut_down)
            else:
                cut_down = False
            if not cut_down:  # the epoch's conversation before its carried turns
                closes = min(n for n in replays[key(asked)] if n >= epoch)
                if closes == epoch and previous:  # and a prefix of what the slot holds, or
                    n = min(len(asked), len(previous))  # that and more: its last answer, what
                    assert asked[:n] == previous[:n]  # the server refused or never saw
            if status == 200:
                summaries[closes] = not cut_down and not asked_since
                asked_since = True
            continue
        found = replays.get(key(said))
        if found is None:  # a message the server refused, taken back out of the log (a
            said = without_recall(said)  # scripted fault may refuse its retry only), with
            assert said[-1]["role"] == "user"  # what auto-recall appended after it
            assert key(said[:-1]) in replays
            continue
        if status != 200:
            continue
        accepted += 1
        if epoch in found and said[: len(previous)] == previous:
            previous = said  # within the epoch: it extends the one before
            excused += asked_since
        elif any(n <= epoch for n in later[accepted:]):  # still this epoch: a message the
            said = without_recall(said)  # stream cut, then refused and taken back
            assert said[-1]["role"] == "user"
            assert epoch in replays[key(said[:-1])]
            continue
        else:  # the first request of a new epoch: the epochs only go forward
            epoch = min(n for n in found if n > epoch)
            previous = said
        assert said[0] == systems[epoch]
        asked_since = False
    instruction = len(tokenize(SUMMARY_INSTRUCTION)) + 6  # and the role markers around it
    # No cache_loss, the first request of each epoch included; only a switch that failed after
    # the server read its summary request (and the epoch went on) left the slot holding that
    # request, and the next one read the carried turns again, as loopd then reports.
    losses = [  # each once: an epoch's carried turns are copies
        r for records in epochs for r in records[header(records).own_from :]
        if isinstance(r, p.CacheLossRecord)
    ]  # fmt: skip
    assert len(losses) <= excused, losses
    for number, records in enumerate(epochs):
        # Stronger than cache_outcome: the previous answer is reused too, which holds only
        # when the loop sends back exactly what the server returned (less the end-of-generation
        # token, which the server never keeps). Within an epoch: its own completions.
        own = records[header(records).own_from :]
        reported = {id(own[at - 1]) for at, r in enumerate(own) if isinstance(r, p.CacheLossRecord)}
        usages = [r for r in own if isinstance(r, p.UsageRecord)]
        for before, after in itertools.pairwise(usages):
            kept = before.cache_n + before.prompt_n + before.predicted_n - 1
            assert after.cache_n >= kept or id(after) in reported, (before, after)
        # The summary reused what the slot held: all of the last completion, or all of its
        # own prompt but the instruction when it asked for less (turns carried). (After a
        # switch that failed, the slot held that one's summary request instead.)
        end = records[-1]
        plain = summaries.get(number, False)
        if isinstance(end, p.EpochEndRecord) and end.summary and usages and plain:
            last = usages[-1]
            kept = last.cache_n + last.prompt_n + last.predicted_n - 1
            asked = end.cache_n + end.prompt_n
            assert end.cache_n >= min(kept, asked - instruction), end


def checked(
    script: list[Reply | Fault],
    plan: Plan,
    n_ctx: int,
    *,
    fenced: bool = False,
    brokerd: bool = False,
    memory: list[MemoryStep] | None = None,
    modes: list[p.Mode | None] | None = None,
    attaching: list[tuple[str, str] | None] | None = None,
) -> tuple[FakeLlamaServer, list[list[p.LogRecord]], p.Baseline]:
    """Run the conversation in a home of its own under the fake clock, then `check` it."""
    with tempfile.TemporaryDirectory() as home:
        fake, epochs, baselines = trio.run(
            conversation,
            Path(home),
            script,
            plan,
            n_ctx,
            fenced,
            brokerd,
            memory,
            modes,
            attaching,
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
    check(fake, epochs, baselines)
    return fake, epochs, baselines[-1]


@given(scripts, turns, contexts)
def test_every_request_extends_the_one_before(
    script: list[Reply | Fault], plan: Plan, n_ctx: int
) -> None:
    _, epochs, _ = checked(script, plan, n_ctx)
    event(f"epochs: {min(len(epochs), 3)}{'+' if len(epochs) > 3 else ''}")


@given(fenced_scripts, turns, contexts)
def test_every_request_of_a_fenced_session_extends_the_one_before(
    script: list[Reply | Fault], plan: Plan, n_ctx: int
) -> None:
    fake, epochs, _ = checked(script, plan, n_ctx, fenced=True)
    assert not any("tools" in body for body in fake.requests.get(0, []))  # none, ever
    calls = [r for records in epochs for r in records if isinstance(r, p.ToolResultRecord)]
    assert all(r.tool_call_id.startswith("fenced-") for r in calls)


@given(broker_scripts, turns, broker_contexts, memory_steps, mode_steps, attach_steps)
def test_every_request_extends_the_one_before_with_brokerds_tools(
    script: list[Reply | Fault],
    plan: Plan,
    n_ctx: int,
    memory: list[MemoryStep],
    modes: list[p.Mode | None],
    attaching: list[tuple[str, str] | None],
) -> None:
    fake, epochs, baseline = checked(
        script, plan, n_ctx, brokerd=True, memory=memory, modes=modes, attaching=attaching
    )
    assert [tool.name for tool in baseline.tools][4:] == list(DEFAULT_CORE)
    assert all(len(body["tools"]) == 14 for body in fake.requests.get(0, []))
    records = [r for epoch in epochs for r in epoch]
    for record in records:
        if isinstance(record, p.ApprovalRecord):  # echo asks; this turn's channel cannot
            assert (record.answer, record.by) == (p.Answer.DENY, p.ApprovedBy.NOBODY)
    results = [r for r in records if isinstance(r, p.ToolResultRecord)]
    assert "not the agent's" not in "".join(r.content for r in results)  # never escaped
    sent = {r.tool_call_id for r in records if isinstance(r, p.CallSentRecord)}
    assert sent <= {r.tool_call_id for r in results}  # every call sent has its result
    for result in results:  # an error is the record's and the event's, never the request's
        count("property: results", "an error" if result.is_error else "not an error")
    assert not any("is_error" in json.dumps(body) for body in fake.requests.get(0, []))
    for epoch in epochs:  # a message that carried a file taints its epoch from it on
        for at, record in enumerate(epoch):
            if isinstance(record, p.UserRecord) and record.files:
                kind = "an image" if record.files[0].media_type == "image/png" else "a text"
                count("property: files", f"a message that carried {kind}")
                assert tainted(epoch[: at + 1])
    event(f"results: {min(len(results), 5)}{'+' if len(results) > 5 else ''}")


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
