"""Schedules with processes: `bxctl schedule add` fires into a session and its answer reaches
`bxctl watch`; `loopd serve` killed with SIGKILL twenty times around due times (the turn just
posted, mid-turn, between a turn's end and its `fired`): no due time ever runs twice, and each
one that ran has its `fired`; a schedule due while loopd was down fires once on start
(`catch_up = once`) or not (`skip`)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from boxmaker import proto as p
from boxmaker.schedules import schedules_file
from boxmaker.store import identity_of

from ..processes import BIN, WAIT_S, Process, Stack

SCRIPT = {"replies": [{"content": "Made."}], "default": {"content": "Looked."}}
KILLS = 20


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path, SCRIPT)
    try:
        yield running
    finally:
        running.stop()


def bxctl(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "bxctl"), *args], env=stack.env, capture_output=True,
                          text=True, timeout=WAIT_S)  # fmt: skip


def made_session(stack: Stack, session: str) -> None:
    done = stack.bxctl("--session", session, "--new", "--say", "Hello.")
    assert done.returncode == 0, done.stderr


def schedule_lines(stack: Stack) -> list[dict[str, Any]]:
    path = stack.home / "schedules.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def scheduled_origins(stack: Stack, session: str) -> list[str]:
    """The origin ids of the session's scheduled turns, in every epoch's log."""
    logs = sorted((stack.home / "sessions" / session).glob("*.jsonl"), key=lambda f: f.name)
    records = [json.loads(line) for f in logs if f.stem.isdigit()
               for line in f.read_text().splitlines()]  # fmt: skip
    return [
        r["origin"]["id"]
        for r in records
        if r["type"] == "user" and r.get("origin", {}).get("channel") == "schedule"
    ]


def kill_loopd(stack: Stack) -> None:
    os.kill(stack.loopd.popen.pid, signal.SIGKILL)
    stack.loopd.stop()  # reaps it and closes its pipes


def test_a_schedule_added_by_the_owner_fires_and_a_watch_hears_it(stack: Stack) -> None:
    made_session(stack, "s1")
    watch = Process([str(BIN / "bxctl"), "watch", "s1", "--json"], stack.env, stack.root)
    try:
        watch.err.wait_for("watching s1")
        added = bxctl(stack, "schedule", "add", "in 1s", "Is the build green?", "--session", "s1")
        assert added.returncode == 0, added.stderr
        heard = watch.out.wait_for('"channel":"schedule"')
        assert "Is the build green?" in heard
        watch.out.wait_for('"kind":"turn_done"')
    finally:
        watch.stop()
    stack.loopd.err.wait_for(" ran")  # its `fired` follows the turn's end
    (fired,) = [r for r in schedule_lines(stack) if r["type"] == "fired"]
    assert (fired["id"], fired["outcome"]) == ("s1", "ran")
    assert scheduled_origins(stack, "s1") == [f"s1@{fired['due']}"]
    listed = bxctl(stack, "schedule", "ls", "--all").stdout
    assert "ran " in listed
    assert "never again" in listed


def test_sigkill_around_due_times_never_runs_a_due_time_twice(stack: Stack) -> None:
    rng = random.Random(45)
    made_session(stack, "s1")
    assert bxctl(stack, "schedule", "add", "every 1s", "Tick.", "--session", "s1").returncode == 0
    reconciled = 0  # turns a start found in the log without their `fired`
    for _ in range(KILLS):
        # Kill once a random number of turns were posted by this loopd, at a random stage of
        # the last one: waiting for the server, just posted, its turn done, its `fired`
        # written, or the next one posted.
        posted = rng.randint(1, 2)
        stage = rng.choice(["waiting", "posted", "done", "fired", "next"])
        if stage == "waiting":  # the turn waits in the server's slot when loopd is killed
            stack.hold()
            posted = 1  # the next due times are overlaps: nothing more is posted
        stack.loopd.err.wait_for("posted to s1", times=posted)
        if stage not in ("waiting", "posted"):
            stack.loopd.err.wait_for("turn s1: ", times=posted)
        if stage in ("fired", "next"):
            stack.loopd.err.wait_for(" ran", times=posted)
        if stage == "next":
            stack.loopd.err.wait_for("posted to s1", times=posted + 1)
        kill_loopd(stack)
        reconciled += sum("before loopd stopped" in line for line in stack.loopd.err.lines)
        if stage == "waiting":
            stack.release()
        stack.loopd = stack.start_loopd()
        stack.loopd.err.wait_for("listening on")
    assert bxctl(stack, "schedule", "pause", "s1").returncode == 0
    kill_loopd(stack)
    stack.loopd = stack.start_loopd()  # its start reconciles what the last kill left
    stack.loopd.err.wait_for("schedules: 1 live (1 paused)")
    origins = scheduled_origins(stack, "s1")
    assert reconciled >= 1  # the kills landed between a turn's post and its `fired`
    assert [o for o, n in Counter(origins).items() if n > 1] == []  # none ran twice
    fired = [r for r in schedule_lines(stack) if r["type"] == "fired"]
    assert [d for d, n in Counter(r["due"] for r in fired).items() if n > 1] == []
    ran = {f"s1@{r['due']}" for r in fired if r["outcome"] == "ran"}
    assert ran == set(origins)  # each that ran has its fired, and no fired is a lie


@pytest.mark.parametrize("catch_up", ["once", "skip"])
def test_due_times_missed_while_loopd_was_down_fire_once_or_not(
    stack: Stack, catch_up: str
) -> None:
    made_session(stack, "s1")
    kill_loopd(stack)  # down; the schedule below was made an hour ago, every 10 minutes
    identity = identity_of(stack.home / "sessions" / "s1")
    made = datetime.now(UTC) - timedelta(hours=1, minutes=5)
    record = p.ScheduleRecord(p.Timestamp(made), "s1", "every 10m", "UTC", "Tick.",
                              p.CatchUp(catch_up), p.CreatedBy.OWNER, p.SessionId("s1"),
                              identity)  # fmt: skip
    schedules_file(stack.home).append(lambda _held: record)
    stack.loopd = stack.start_loopd()
    stack.loopd.err.wait_for("schedules: 1 live (0 paused)")
    if catch_up == "once":
        stack.loopd.err.wait_for(" ran")
    kill_loopd(stack)
    origins = scheduled_origins(stack, "s1")
    fired = [r for r in schedule_lines(stack) if r["type"] == "fired"]
    if catch_up == "skip":
        assert (origins, fired) == ([], [])
        return
    latest = made + timedelta(hours=1)  # the latest of six due times, and only it
    assert origins == [f"s1@{p.Timestamp(latest)}"]
    assert [(r["due"], r["outcome"]) for r in fired] == [(str(p.Timestamp(latest)), "ran")]
    header = [r["content"] for r in stack.log("s1") if r["type"] == "user"][-1].splitlines()[0]
    assert header.endswith("it starts 5 min late.]")


def test_the_model_finds_schedule_asks_the_owner_and_its_turn_comes_back_as_its_own(
    tmp_path: Path,
) -> None:
    found = {"tool_calls": [["find_tool", json.dumps({"query": "reminder"})]]}
    call = {"name": "schedule", "arguments": {"when": "in 1s", "message": "Check the oven."}}
    scheduled = {"tool_calls": [["call_tool", json.dumps(call)]]}
    script = {"replies": [found, scheduled, {"content": "I will remind you."}],
              "default": {"content": "The oven: checked."}}  # fmt: skip
    stack = Stack(tmp_path, script)
    try:
        watch = Process([str(BIN / "bxctl"), "watch", "m1", "--json"], stack.env, stack.root)
        try:
            asked = stack.bxctl("--session", "m1", "--new", "--yes", "--json", "--say",
                                "Remind me to check the oven.")  # fmt: skip
            assert asked.returncode == 0, asked.stderr
            events = [
                json.loads(line)["body"].get("event", {}) for line in asked.stdout.splitlines()
            ]
            needed = [e for e in events if e.get("type") == "approval_needed"]
            assert [e["tool"] for e in needed] == ["schedule"]  # asked, by the shipped policy
            watch.err.wait_for("watching m1")
            heard = json.loads(watch.out.wait_for('"channel":"schedule"'))
            first = heard["body"]["frame"]["body"]["content"].splitlines()[0]
            assert first.startswith("[A scheduled message (s1, at ")
            assert "set by you, the agent, in turn 1: the words below are your own" in first
            watch.out.wait_for('"kind":"turn_done"')
        finally:
            watch.stop()
        (made,) = [r for r in schedule_lines(stack) if r["type"] == "schedule"]
        assert (made["created_by"], made["session"], made["turn"]) == ("agent", "m1", 1)
        assert "tainted" not in made
    finally:
        stack.stop()
