"""`make bench` (`python -m bxdev.bench`): every row of SPEC section 12 in one run, printed as
it is measured and written to `docs/benchmarks.md`. It reports; it does not fail on a missed
bar (it fails only when a measurement could not be made).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

from . import (
    broker,
    building,
    cache,
    checkpoint,
    concurrency,
    epochs,
    first,
    footprint,
    gateway,
    listing,
    many,
    mcp,
    memory,
    overhead,
    pace,
    profile,
    replay,
    resume,
    rules,
    sandbox,
    schedules,
    throughput,
    watchers,
)
from .peers import row as peers
from .report import Row, cpu_ticks, machine, render, splice, steal_line

__all__ = ["FULL", "QUICK", "Scale", "main", "run_rows"]


@attrs.frozen
class Scale:
    """How much each row measures."""

    overhead_runs: int
    overhead_warmup: int
    throughput_tokens: int
    throughput_runs: int
    pace_runs: int
    footprint_sessions: int
    footprint_turns: int
    resume_sizes: tuple[int, ...]
    resume_runs: int
    building_completions: tuple[int, ...]
    sessions: int
    turns: int
    listed: int
    listing_runs: int
    switch_sizes: tuple[int, ...]
    switch_runs: int
    epoch_records: int
    epoch_runs: int
    peer_conversations: int
    broker_calls: int
    broker_warmup: int
    sandbox_calls: int
    sandbox_cold: int
    mcp_calls: int
    memory_sessions: int
    memory_turns: int
    memory_queries: int
    memory_updates: int
    rebuild_records: int
    rules_runs: int
    firing_sessions: int
    firings: int
    idle_seconds: float
    gateway_messages: int
    gateway_words: int
    replay_sizes: tuple[int, ...]
    checkpoint_workspaces: tuple[tuple[int, int], ...]  # (files, bytes each)
    checkpoint_calls: int


FULL = Scale(
    overhead_runs=100,
    overhead_warmup=10,
    throughput_tokens=20_000,
    throughput_runs=5,
    pace_runs=20,
    footprint_sessions=100,
    footprint_turns=10,
    resume_sizes=(100, 1_000, 10_000, 11_000, 100_000),
    resume_runs=3,
    building_completions=(10, 100, 1_000),
    sessions=32,
    turns=5,
    listed=1_000,
    listing_runs=5,
    switch_sizes=(1_000, 10_000),
    switch_runs=5,
    epoch_records=10_000,
    epoch_runs=5,
    peer_conversations=5,
    broker_calls=2_000,
    broker_warmup=100,
    sandbox_calls=100,
    sandbox_cold=10,
    mcp_calls=200,
    memory_sessions=1_000,
    memory_turns=100,
    memory_queries=200,
    memory_updates=100,
    rebuild_records=100_000,
    rules_runs=200,
    firing_sessions=4,
    firings=50,
    idle_seconds=60.0,
    gateway_messages=30,
    gateway_words=300,
    replay_sizes=(1_000, 10_000, 30_000),
    checkpoint_workspaces=((1_000, 10_000), (10_000, 10_000)),
    checkpoint_calls=30,
)
# A smoke run of the rows' code for the test suite (all but those that need the real server,
# and the peers' installs): the figures mean nothing.
QUICK = Scale(
    overhead_runs=3,
    overhead_warmup=1,
    throughput_tokens=500,
    throughput_runs=1,
    pace_runs=1,
    footprint_sessions=3,
    footprint_turns=2,
    resume_sizes=(100, 1_000),
    resume_runs=1,
    building_completions=(10, 100),
    sessions=4,
    turns=2,
    listed=20,
    listing_runs=1,
    switch_sizes=(100,),
    switch_runs=1,
    epoch_records=200,
    epoch_runs=1,
    peer_conversations=1,
    broker_calls=20,
    broker_warmup=2,
    sandbox_calls=3,
    sandbox_cold=2,
    mcp_calls=5,
    memory_sessions=5,
    memory_turns=10,
    memory_queries=5,
    memory_updates=3,
    rebuild_records=200,
    rules_runs=2,
    firing_sessions=1,
    firings=2,
    idle_seconds=1.0,
    gateway_messages=2,
    gateway_words=20,
    replay_sizes=(100, 300),
    checkpoint_workspaces=((50, 1000), (200, 1000)),
    checkpoint_calls=3,
)
ROWS = ("overhead", "profile", "pace", "throughput", "watchers", "footprint", "resume",
        "building", "concurrency", "listing", "switch", "epochs", "broker", "rules", "sandbox",
        "mcp", "recall", "index", "rebuild", "autorecall", "firing", "idle", "gateway", "cache",
        "replay", "checkpoint", "many", "first", "peers")  # fmt: skip
REAL_SERVER = ("cache", "many", "first", "peers")
# --quick runs these only by name (bwrap, MCP, py-spy, Synapse)
NOT_QUICK = (*REAL_SERVER, "sandbox", "mcp", "profile", "gateway")


def rows(scale: Scale, root: Path) -> dict[str, Callable[[], Awaitable[Row]]]:
    return {
        "overhead": lambda: overhead.run(
            root / "overhead", runs=scale.overhead_runs, warmup=scale.overhead_warmup
        ),
        "profile": lambda: profile.run(root / "profile", runs=scale.overhead_runs),
        "pace": lambda: pace.run(root / "pace", runs=scale.pace_runs),
        "throughput": lambda: throughput.run(
            root / "throughput", tokens=scale.throughput_tokens, runs=scale.throughput_runs
        ),
        "watchers": lambda: watchers.run(
            root / "watchers", tokens=scale.throughput_tokens, runs=scale.throughput_runs
        ),
        "footprint": lambda: footprint.run(
            root / "footprint", sessions=scale.footprint_sessions, turns=scale.footprint_turns
        ),
        "resume": lambda: resume.run(
            root / "resume", sizes=scale.resume_sizes, runs=scale.resume_runs
        ),
        "building": lambda: building.run(root / "building", scale.building_completions),
        "replay": lambda: replay.run(root / "replay", sizes=scale.replay_sizes),
        "checkpoint": lambda: checkpoint.run(
            root / "checkpoint",
            workspaces=scale.checkpoint_workspaces,
            calls=scale.checkpoint_calls,
        ),
        "concurrency": lambda: concurrency.run(
            root / "concurrency", sessions=scale.sessions, turns=scale.turns
        ),
        "listing": lambda: listing.run(
            root / "listing", sessions=scale.listed, runs=scale.listing_runs
        ),
        "switch": lambda: epochs.switch_row(
            root / "switch", sizes=scale.switch_sizes, runs=scale.switch_runs
        ),
        "epochs": lambda: epochs.resume_row(
            root / "epochs", records=scale.epoch_records, runs=scale.epoch_runs
        ),
        "broker": lambda: broker.run(
            root / "broker", calls=scale.broker_calls, warmup=scale.broker_warmup
        ),
        "rules": lambda: rules.run(runs=scale.rules_runs),
        "sandbox": lambda: sandbox.run(
            root / "sandbox", calls=scale.sandbox_calls, cold=scale.sandbox_cold
        ),
        "mcp": lambda: mcp.run(root / "mcp", calls=scale.mcp_calls),
        # The memory rows share one corpus of sessions, written at the first that runs.
        "recall": lambda: memory.recall_row(
            root / "memory",
            sessions=scale.memory_sessions,
            turns=scale.memory_turns,
            queries=scale.memory_queries,
        ),
        "index": lambda: memory.update_row(
            root / "memory",
            sessions=scale.memory_sessions,
            turns=scale.memory_turns,
            runs=scale.memory_updates,
        ),
        "rebuild": lambda: memory.rebuild_row(root / "rebuild", records=scale.rebuild_records),
        "autorecall": lambda: memory.autorecall_row(
            root / "memory",
            sessions=scale.memory_sessions,
            turns=scale.memory_turns,
            runs=scale.memory_queries,
        ),
        "firing": lambda: schedules.firing_row(
            root / "firing", sessions=scale.firing_sessions, firings=scale.firings
        ),
        "idle": lambda: schedules.idle_row(root / "idle", seconds=scale.idle_seconds),
        "gateway": lambda: gateway.run(
            root / "gateway", messages=scale.gateway_messages, words=scale.gateway_words
        ),
        "cache": lambda: cache.run(root / "cache"),
        "many": lambda: many.run(root / "many"),
        "first": lambda: first.run(root / "first"),
        "peers": lambda: peers.run(root / "peers", conversations=scale.peer_conversations),
    }


async def run_rows(names: list[str], scale: Scale, root: Path) -> list[Row]:
    table = rows(scale, root)
    done = []
    for name in names:
        started = time.monotonic()
        row = await table[name]()
        done.append(row)
        mark = "met" if row.met else "NOT MET"
        print(f"{row.figure}: {row.result} [bar {row.bar}: {mark}] "
              f"({time.monotonic() - started:.0f} s)", flush=True)  # fmt: skip
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bxdev.bench", description=__doc__)
    parser.add_argument("--out", type=Path, help="the document to write (docs/benchmarks.md)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the code only")
    parser.add_argument("rows", nargs="*", help=f"rows to run, of {', '.join(ROWS)} (all)")
    args = parser.parse_args(argv)
    if unknown := [name for name in args.rows if name not in ROWS]:
        parser.error(f"no row {', '.join(unknown)}; the rows are {', '.join(ROWS)}")
    scale = QUICK if args.quick else FULL
    default = [name for name in ROWS if name not in NOT_QUICK] if args.quick else list(ROWS)
    names = [name for name in ROWS if name in args.rows] or default
    ticks = cpu_ticks()
    with tempfile.TemporaryDirectory(prefix="boxmaker-bench-") as tmp:
        done = trio.run(run_rows, names, scale, Path(tmp))
    steal = steal_line(ticks, cpu_ticks())
    for line in steal:
        print(line)
    if args.out:
        when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        full = names == list(ROWS)
        command = "make bench" if full else f"make bench ROWS='{' '.join(names)}'"
        if args.quick:
            command += " (--quick: tiny sizes, figures without meaning)"
        generated = render(
            done,
            machine_lines=[*machine(), *steal],
            command=command,
            when=when,
            partial=not full,
        )
        old = args.out.read_text() if args.out.exists() else "# Benchmarks\n"
        args.out.write_text(splice(old, generated))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
