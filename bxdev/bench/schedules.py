"""Rows of issue 45: how late a scheduled turn starts, and what live schedules cost loopd idle.

`firing`: sessions each with one schedule `every 1s` (the hourly bound lifted), each watched;
the delay of a firing is from its due time (in its origin) to the moment its turn frame
reaches the watch, on the same machine's wall clock.

`idle`: loopd's CPU over a stretch with no turn, with no schedule and then with 1,000 live
ones (daily, none due in the stretch): the price of looking at the file and the wall clock
once a second, and of keeping the schedules' next due times.
"""

from __future__ import annotations

import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import trio

from boxmaker.config import SchedulesConfig
from boxmaker.proto import CreatedBy, ScheduleRecord, SessionId, Timestamp
from boxmaker.schedules import Book, Wanted, made, schedules_file
from boxmaker.store import identity_of

from .harness import BenchError, cpu_seconds, open_stack, open_watch, timed_turn, turn_frame
from .report import Row
from .stats import spread

__all__ = ["firing_row", "idle_row"]

LIFTED = "[schedules]\nmax_scheduled_turns_per_hour = 1000000\nmax_schedules = 100000\n"
BOUNDS = SchedulesConfig(max_scheduled_turns_per_hour=1_000_000, max_schedules=100_000)
IDLE_SCHEDULES = 1000


def _add(home: Path, when: str, session: str | None) -> None:
    identity = identity_of(home / "sessions" / session) if session else ""
    wanted = Wanted(when, "UTC", "Tick.", CreatedBy.OWNER, SessionId(session) if session else None,
                    identity, new_session=session is None)  # fmt: skip
    now = Timestamp(datetime.now(UTC))
    record = schedules_file(home).append(lambda held: made(Book(held), wanted, now, BOUNDS))
    if not isinstance(record, ScheduleRecord):
        raise BenchError(f"no schedule made: {record}")


async def _watch(
    socket: Path, session: str, firings: int, delays: list[float], ready: trio.Event
) -> None:
    """Watch `session` (`ready` once in place) until `firings` scheduled turn frames came;
    each one's delay."""
    stream, rest = await open_watch(socket, session)
    async with stream:
        ready.set()
        seen = 0
        while seen < firings:
            chunk = await stream.receive_some(1 << 16)
            if not chunk:
                raise BenchError("loopd ended the watch")
            now = time.time()
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                if b'"channel":"schedule"' not in line or b'"kind":"turn"' not in line:
                    continue
                origin = json.loads(line)["body"]["origin"]["id"]
                due = datetime.fromisoformat(origin.split("@", 1)[1]).timestamp()
                delays.append((now - due) * 1000)
                seen += 1


async def firing_row(root: Path, *, sessions: int, firings: int) -> Row:
    delays: list[float] = []
    with open_stack(root, "--reply", "Done.", config=LIFTED) as stack:
        socket, home = stack.loopd.socket, stack.loopd.home
        names = [f"f{n}" for n in range(sessions)]
        for name in names:
            await timed_turn(socket, turn_frame(name, "Hello.", resume=False))
        with trio.fail_after(firings * 3 + 60):
            async with trio.open_nursery() as nursery:
                for name in names:
                    ready = trio.Event()
                    nursery.start_soon(_watch, socket, name, firings, delays, ready)
                    await ready.wait()
                for name in names:
                    _add(home, "every 1s", name)
    ordered = sorted(delays)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    median = statistics.median(ordered)
    details = (
        f"{sessions} sessions, each with one schedule `every 1s`, {firings} firings each "
        f"({len(ordered)} in all), each session watched; the delay is from the due time in the "
        "firing's origin to its turn frame at the watch (the same machine's clock).",
        "",
        "| firings | median | p99 | least | most |",
        "|---|---|---|---|---|",
        f"| {len(ordered)} | {median:.1f} ms | {p99:.1f} ms | {ordered[0]:.1f} ms | "
        f"{ordered[-1]:.1f} ms |",
    )
    return Row(
        figure="scheduled turns: firing delay",
        result=f"median {median:.1f} ms, p99 {p99:.1f} ms from due time to turn frame",
        bar="reported (no bar)",
        met=True,
        details=details,
    )


async def idle_row(root: Path, *, seconds: float) -> Row:
    used: dict[int, float] = {}
    for count in (0, IDLE_SCHEDULES):
        with open_stack(root / f"n{count}", "--reply", "Done.") as stack:
            home = stack.loopd.home
            for n in range(count):
                _add(home, f"{n % 60} {n % 24} * * *", None)  # daily, spread over the day
            await trio.sleep(2)  # the file read, the next due times made
            before = cpu_seconds(stack.loopd.pid)
            await trio.sleep(seconds)
            used[count] = (cpu_seconds(stack.loopd.pid) - before) / seconds * 60
    per_minute = spread([used[IDLE_SCHEDULES]])
    details = (
        f"loopd idle for {seconds:g} s (no turn), its CPU (every thread) in ms per minute:",
        "",
        "| live schedules | CPU per minute |",
        "|---|---|",
        *(f"| {count:,} | {used[count] * 1000:.0f} ms |" for count in used),
    )
    return Row(
        figure="scheduled turns: loopd idle",
        result=f"{per_minute.median * 1000:.0f} ms CPU per minute with {IDLE_SCHEDULES:,} live "
        f"schedules ({used[0] * 1000:.0f} ms with none)",
        bar="reported (no bar)",
        met=True,
        details=details,
    )
