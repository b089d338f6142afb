"""Two rows for epochs.

**epoch switch**: what opening a new epoch costs loopd, the summary completion left out (it is
the model's time, not loopd's). A session whose epoch holds 10³ or 10⁴ records is resumed, and
`open_epoch` runs as a turn runs it, against the in-process fake, whose context the epoch fills
to `[context] epoch_at` (as when loopd switches by its own count); the time spent inside the
summary's `chat_with_retry` is taken off the whole.
What is left: choosing the turns to carry and building the summary request, `epoch_end`
appended and fsynced, the new epoch's two files staged, fsynced, renamed into place and the
folder fsynced, the session's state rebuilt from them, and `index.json` written.

**resume of epochs**: a session of 10 epochs of 10⁴ records each, resumed in a new process and
its next request built, against one epoch of 10⁴ records: resume reads only the current
epoch's files, so both should cost the same.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs

from boxmaker import layout
from boxmaker.clock import SystemClock
from boxmaker.config import Config, parse_config
from boxmaker.loopd.infer import Client, HeldSlot, OnEvent, request_body
from boxmaker.loopd.loop import Runtime, open_epoch
from boxmaker.proto import (
    AssistantRecord,
    Baseline,
    ChatRequest,
    EpochEndRecord,
    EpochStartRecord,
    LogRecord,
    SessionId,
    SessionStartRecord,
    SystemMessage,
    TurnEvent,
    UsageRecord,
    dumps,
    encode_messages,
)
from boxmaker.session import Link, assemble_baseline, baseline_bytes, messages, seal, sha256_hex
from boxmaker.store import Store
from boxmaker.testing import FakeLlamaServer, FakeTools, Reply
from boxmaker.testing._render import render

from .harness import SYSTEM
from .report import Row
from .resume import measure
from .sessions import history, write_session
from .stats import spread

__all__ = ["resume_row", "switch_row"]

EPOCHS = 10
BAR_RATIO = 1.25  # ten epochs may cost at most this much more than one, for noise


class _TimedClient(Client):
    """The client, noting the time its callers spend holding a slot (the completions)."""

    waited = 0.0

    @asynccontextmanager
    async def slot(self, slot: str, on_event: OnEvent) -> AsyncIterator[HeldSlot]:
        started = time.perf_counter()
        try:
            async with super().slot(slot, on_event) as held:
                yield held
        finally:
            self.waited += time.perf_counter() - started


async def switch_row(root: Path, *, sizes: tuple[int, ...], runs: int) -> Row:
    figures: dict[int, list[tuple[float, float, int]]] = {}  # loopd s, summary s, carried
    for size in sizes:
        figures[size] = [await _switch(root / f"switch-{size}-{n}", size) for n in range(runs)]
    details = [
        f"Median of {runs} switches at each size, each on a new session whose epoch holds the "
        "records (turns with a tool call, about 2 kB a turn), `[context]` defaults, the "
        "context what the epoch fills to `epoch_at`; the summary from the in-process fake.",
        "",
        "| records in the epoch | switch without the summary (ms) | summary completion (ms) "
        "| turns carried |",
        "|---|---|---|---|",
    ]
    for size in sizes:
        own = spread([loopd * 1000 for loopd, _, _ in figures[size]])
        summary = spread([s * 1000 for _, s, _ in figures[size]])
        carried = figures[size][0][2]
        details.append(f"| {size:,} | {own.show(digits=1)} | {summary.median:.1f} "
                       f"| {carried} |")  # fmt: skip
    largest = spread([loopd for loopd, _, _ in figures[max(sizes)]]).median
    return Row(
        figure="epoch switch",
        result=f"{largest * 1000:,.0f} ms at {max(sizes):,} records, the summary left out",
        bar="reported (no bar in SPEC section 12)",
        met=True,
        details=tuple(details),
    )


async def _switch(root: Path, size: int) -> tuple[float, float, int]:
    """One switch: (seconds of loopd's own work, seconds of the summary, turns carried)."""
    home = root / "home"
    whole = (size - 1) // 7 * 7  # whole turns of seven records: a switch follows a turn's end
    config = parse_config("", root / "config.toml", {"BOXMAKER_HOME": str(home)})
    baseline = assemble_baseline(SYSTEM, None)
    records, tokens = _counted(list(itertools.islice(history(), whole)), baseline, config)
    await write_session(home, "switch", records)
    clock = SystemClock()
    store = Store(home, clock)
    session = store.resume(SessionId("switch"))
    # The context is what the epoch fills to `epoch_at`, as when loopd switches by its count.
    n_ctx = int(tokens / config.context.epoch_at) + 1
    fake = FakeLlamaServer(default=Reply(content="A summary, " * 40), n_ctx=n_ctx)
    async with _TimedClient(
        config, transport=fake.mock_transport(), rng=random.Random(0)
    ) as client:
        await client.context_size("main")  # asked once, at a session's first turn
        runtime = Runtime(config, client, FakeTools(clock), clock)
        started = time.perf_counter()
        await open_epoch(session, runtime, _ignore, "make bench")
        elapsed = time.perf_counter() - started
        opened = session.state.head.start
        carried = opened.carried_turns if opened else 0
        session.close()
    assert fake.statuses[0] == [200], "the summary request was refused"
    return elapsed - client.waited, client.waited, carried


def _ignore(_event: TurnEvent) -> None:
    pass


def _counted(
    records: list[LogRecord], baseline: Baseline, config: Config
) -> tuple[list[LogRecord], int]:
    """The records with `usage` figures as the fake server would have counted them (the
    history's own are made up), so the turns carried are the ones loopd would carry; and the
    size of the whole conversation in the fake's tokens."""
    said = (SystemMessage(baseline.system), *messages(baseline, records))
    tokens = len(render(request_body(ChatRequest("main", said, baseline.tools), 0,
                                     config.inference)))  # fmt: skip
    ratio = tokens / len(encode_messages(said))
    counted: list[LogRecord] = []
    seen = len(encode_messages(said[:1]))
    answer = 0
    for record in records:
        size = len(encode_messages(messages(baseline, [record])))
        if isinstance(record, AssistantRecord):
            answer = size
        if isinstance(record, UsageRecord):
            prompt = round(ratio * (seen - answer))
            record = attrs.evolve(record, cache_n=prompt - 40, prompt_n=40,
                                  predicted_n=round(ratio * answer))  # fmt: skip
        seen += size
        counted.append(record)
    return counted, tokens


async def resume_row(root: Path, *, records: int, runs: int) -> Row:
    home = root / "home"
    one = await write_session(home, "one-epoch", itertools.islice(history(), records - 1))
    many = _write_epochs(home, "ten-epochs", records)
    single = spread([measure(home, "one-epoch")["seconds"] for _ in range(runs)])
    ten = spread([measure(home, "ten-epochs")["seconds"] for _ in range(runs)])
    ratio = ten.median / single.median
    details = [
        f"Each resume in a new process, the next request built, {runs} runs each: a session "
        f"of one epoch of {records:,} records ({one / 1e6:.1f} MB), and one of {EPOCHS} epochs "
        f"of {records:,} records each ({many / 1e6:.1f} MB in all).",
        "",
        "| session | resume (ms) |",
        "|---|---|",
        f"| 1 epoch | {(single.median * 1000):,.1f} (min {single.low * 1000:,.1f}, "
        f"max {single.high * 1000:,.1f}) |",
        f"| {EPOCHS} epochs | {(ten.median * 1000):,.1f} (min {ten.low * 1000:,.1f}, "
        f"max {ten.high * 1000:,.1f}) |",
    ]
    return Row(
        figure="resume of epochs",
        result=f"{EPOCHS} epochs of {records:,} records resume in {ratio:.2f} times what one "
        "epoch takes",
        bar="what one epoch costs (ratio about 1)",
        met=ratio <= BAR_RATIO,
        details=tuple(details),
    )


def _write_epochs(home: Path, name: str, records: int) -> int:
    """A session of `EPOCHS` epochs of `records` records each, written straight to disk as
    loopd would have left them (each closed epoch ending with its epoch_end); its size."""
    folder = home / "sessions" / name
    folder.mkdir(parents=True, mode=0o700)
    baseline = baseline_bytes(assemble_baseline(SYSTEM, None))
    genesis = sha256_hex(baseline)
    now = SystemClock().now()
    turns = history()
    total = 0
    for epoch in range(EPOCHS):
        head: list[LogRecord] = [SessionStartRecord(now, SessionId(name), epoch, "main", genesis)]
        if epoch:
            head.append(EpochStartRecord(now, epoch, now, 0, 0, "", 0, 0))
        body = list(itertools.islice(turns, records - len(head) - (epoch < EPOCHS - 1)))
        if epoch < EPOCHS - 1:
            body.append(EpochEndRecord(now, epoch, None, 0, 0, 0, 0))
        link, lines = Link(0, genesis), []
        for record in [*head, *body]:
            line, link = seal(dumps(record), link)
            lines.append(line)
        (folder / layout.baseline_name(epoch)).write_bytes(baseline)
        data = b"".join(lines)
        (folder / layout.log_name(epoch)).write_bytes(data)
        total += len(data)
    return total
