"""Row replay (issue 46): `bxctl replay`'s pace, in records a second, on sessions of 10³, 10⁴
and 3·10⁴ records (growth fitted across them), and the replay of 10⁴ records against the
resume of the same session.

The sessions are recorded by the loop itself (`run_turn` against the in-process fake, its
tools the fake's), a tool call in every other turn, so each holds what a real one does: the
turns' settings, `call_sent`, results. Replay runs as `loopd replay` runs it, under a mock
clock; the time is the wall clock's, the whole of it (the scratch copy, the turns run again,
the comparison line by line).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import trio
import trio.testing

from boxmaker.clock import TickingClock
from boxmaker.config import parse_config
from boxmaker.loopd.infer import Client
from boxmaker.loopd.loop import Runtime, run_turn
from boxmaker.loopd.replay import read_tape, replay, select_runs
from boxmaker.proto import SessionId
from boxmaker.session import assemble_baseline
from boxmaker.store import Store
from boxmaker.testing import FakeLlamaServer, FakeTools, Reply

from .harness import SYSTEM
from .report import Row
from .resume import LINEAR, measure
from .stats import growth_exponent

__all__ = ["record_session", "run"]

PER_TWO_TURNS = 10  # records: a plain turn's 4, a tool turn's 6


async def record_session(home: Path, session: str, records: int) -> Path:
    """A session of about `records` records, recorded by the loop; its folder. A tool call
    every other turn; the context (16,384 tokens) makes an epoch of a few thousand records,
    as a real one holds, and the fake's summaries open the next."""
    turns = max(2, 2 * records // PER_TWO_TURNS)
    fake = FakeLlamaServer(default=Reply(content="Noted."), n_ctx=16_384)
    config = parse_config("", home / "config.toml", {"BOXMAKER_HOME": str(home)})
    clock = TickingClock()
    store = Store(home, clock)
    opened = store.create(SessionId(session), assemble_baseline(SYSTEM, None), "main")
    transport = fake.mock_transport()
    async with Client(config, transport=transport, rng=random.Random(0)) as client:
        runtime = Runtime(config, client, FakeTools(clock), clock)
        for number in range(turns // 2):
            fake.add(Reply(tool_calls=(("clock", "{}"),)))
            await run_turn(opened, runtime, f"What time is it, {number}?", _ignore)
            await run_turn(opened, runtime, f"Note {number}.", _ignore)
            fake.requests.clear()  # the fake keeps every request: not this bench's memory
    opened.close()
    return opened.log_path.parent


def timed_replay(folder: Path) -> tuple[float, int, bool]:
    """Seconds to replay the whole session, the lines compared, and whether identical."""
    config = parse_config("", folder / "config.toml", {})
    started = time.perf_counter()
    tape = read_tape(folder)

    async def replaying() -> object:
        return await replay(folder, select_runs(tape), tape, config)

    report = trio.run(replaying, clock=trio.testing.MockClock(autojump_threshold=0))
    seconds = time.perf_counter() - started
    return seconds, report.lines, report.identical  # type: ignore[attr-defined]


async def run(root: Path, *, sizes: tuple[int, ...]) -> Row:
    results: dict[int, tuple[float, int]] = {}
    resumed, resumed_at = 0.0, 0
    for size in sizes:
        home = root / f"home-{size}"
        folder = await record_session(home, f"replay-{size}", size)
        seconds, lines, identical = await trio.to_thread.run_sync(timed_replay, folder)
        if not identical:
            raise RuntimeError(f"the session of {size:,} records did not replay identical")
        results[size] = (seconds, lines)
        if size in (10_000, max(sizes)) and not resumed_at:
            resumed = measure(home, folder.name)["seconds"]
            resumed_at = size
    counts = {size: lines + 1 for size, (_, lines) in results.items()}  # and the first line
    exponent = growth_exponent(list(counts.values()), [s for s, _ in results.values()])
    largest = max(sizes)
    seconds, lines = results[largest]
    details = [
        "Each session is recorded by the loop against the in-process fake (a tool call every "
        "other turn, epochs of a 16,384-token context); replay runs it again as `loopd replay` "
        "does and compares every line. Wall time, one run each; the growth is fitted on the "
        "records each session holds.",
        "",
        "| records | replay (s) | records a second |",
        "|---|---|---|",
        *(f"| {counts[n]:,} | {s:.2f} | {counts[n] / s:,.0f} |" for n, (s, _) in results.items()),
        "",
        f"The session of {counts[resumed_at]:,} records: replayed in "
        f"{results[resumed_at][0]:.2f} s, resumed (read back and its next request built, in a "
        f"new process) in {resumed * 1000:,.0f} ms.",
    ]
    return Row(
        "replay",
        f"{counts[largest] / seconds:,.0f} records/s at {counts[largest]:,} records, time "
        f"growing as records^{exponent:.2f}; {counts[resumed_at]:,} records replayed in "
        f"{results[resumed_at][0]:.2f} s (resumed in {resumed * 1000:,.0f} ms)",
        f"linear in the records (exponent at most {LINEAR})",
        exponent <= LINEAR,
        tuple(details),
    )


def _ignore(event: object) -> None:
    pass
