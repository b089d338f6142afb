"""The memory rows (issue 31): `recall` over 1,000 sessions of 100 turns, the recall index
brought up to date after a turn, a rebuild from nothing of 10⁵ records, and auto-recall's cost
per turn through a real brokerd.

The home they search is written once per run (`corpus`): each session's log as loopd writes
it (hash-chained records), turns of a user message, the model's answer and, every third turn,
a tool's result, their words drawn from a vocabulary of 30,000 made-up words with the
frequencies of natural language (Zipf's law, exponent 1.07), so a query's words are as common
or as rare as a person's. The recall index is made from nothing over it, as brokerd makes it
at its first start, and its size is set against the logs'.

A recall is timed as brokerd answers one: the notes read up to date, the search, the index
closed again (brokerd keeps no file open between operations). The queries are of two kinds:
two to four words of the vocabulary's middle ranks (what a model asks `recall` for), and a
user message of the corpus whole (what auto-recall asks).
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import trio

from boxmaker import layout
from boxmaker.clock import SystemClock
from boxmaker.config import load_config
from boxmaker.memory import RecallIndex, query_words
from boxmaker.proto import (
    AssistantRecord,
    DataClass,
    LogRecord,
    Outcome,
    RecallFrame,
    ResultResponse,
    SessionId,
    ToolCall,
    ToolResultRecord,
    TurnEndRecord,
    UsageRecord,
    UserRecord,
)
from boxmaker.serving.broker_port import BrokerPort
from boxmaker.store import Store

from .broker import CALL_TIMEOUT_S, _open_brokerd
from .harness import BenchError
from .report import Row
from .sessions import write_session
from .stats import p90

__all__ = ["autorecall_row", "rebuild_row", "recall_row", "update_row"]

BAR_RECALL_MS = 50.0
BAR_UPDATE_MS = 5.0
VOCABULARY = 30_000
ZIPF = 1.07
SEED = 31


class Words:
    """Made-up words with natural frequencies: `draw(n)` is n of them."""

    def __init__(self, rng: random.Random) -> None:
        syllables = [c + v for c in "bcdfghjklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai")]
        made: dict[str, None] = {}
        while len(made) < VOCABULARY:
            made["".join(rng.choices(syllables, k=rng.choice((1, 2, 2, 3, 3, 4))))] = None
        self.words = list(made)
        self.weights = list(itertools.accumulate(1 / (rank**ZIPF) for rank in
                                                 range(1, VOCABULARY + 1)))  # fmt: skip
        self.rng = rng

    def draw(self, count: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.weights, k=count))

    def middle(self, count: int) -> str:
        """Words of the middle ranks (neither the commonest nor the rarest)."""
        return " ".join(self.rng.choice(self.words[50:5_000]) for _ in range(count))


def turn_records(words: Words, number: int) -> list[LogRecord]:
    """One turn as loopd logs it: the user's message, a tool call and its result every third
    turn, the answer, each completion's usage, the turn's end."""
    now = SystemClock().now()
    rng = words.rng

    def usage() -> UsageRecord:
        return UsageRecord(now, 1000, 40, 60, 0, False)

    said: list[LogRecord] = [UserRecord(now, words.draw(rng.randint(8, 25)) + "?")]
    if number % 3 == 0:
        call = ToolCall(f"call{number:06d}", "read_file", '{"path":"notes.md"}')
        said += [AssistantRecord(now, None, None, (call,)), usage(),
                 ToolResultRecord(now, number, call.id, words.draw(rng.randint(40, 80)),
                                  DataClass.PRIVATE, True, False)]  # fmt: skip
    said += [AssistantRecord(now, words.draw(rng.randint(25, 60)) + ".", None, None), usage()]
    completions = sum(isinstance(r, AssistantRecord) for r in said)
    called = int(number % 3 == 0)
    said.append(TurnEndRecord(now, Outcome.DONE, completions, called, 80, 2000, 120, 9))
    return said


def session_turns(words: Words, turns: int) -> Iterator[LogRecord]:
    for number in range(1, turns + 1):
        yield from turn_records(words, number)


async def corpus(root: Path, sessions: int, turns: int) -> tuple[Path, Words, float]:
    """The home of `sessions` sessions of `turns` turns (made once per run), and the seconds
    its recall index took to make from nothing."""
    home = root / "home"
    words = Words(random.Random(SEED))
    done = root / "made"
    if done.exists():
        return home, words, float(done.read_text())
    for number in range(sessions):
        await write_session(home, f"s{number:05d}", session_turns(words, turns))
    started = time.perf_counter()
    index = RecallIndex(home)
    index.update()
    index.close()
    seconds = time.perf_counter() - started
    done.write_text(repr(seconds))
    return home, words, seconds


def _figures(values: list[float]) -> tuple[float, float]:
    """The median and the 90th percentile."""
    return statistics.median(values), p90(values)


def _sizes(home: Path) -> tuple[int, int, int]:
    """The bytes of every log, and of the index; the records of every log."""
    logs = records = 0
    for log in (home / "sessions").glob("*/*.jsonl"):
        if layout.epoch_of(log.name) is None:  # an origin index, not a log
            continue
        data = log.read_bytes()
        logs += len(data)
        records += data.count(b"\n")
    return logs, (home / "memory" / "index.sqlite").stat().st_size, records


def _recall(index: RecallIndex, words: list[str]) -> float:
    """Milliseconds of one recall as brokerd makes it."""
    started = time.perf_counter()
    index.update_notes()
    index.search(words, 5, session="bench", first_turn=1)
    index.close()
    return (time.perf_counter() - started) * 1000


async def recall_row(root: Path, *, sessions: int, turns: int, queries: int) -> Row:
    home, words, built = await corpus(root, sessions, turns)
    logs, size, records = _sizes(home)
    index = RecallIndex(home)
    asked = [query_words(words.middle(words.rng.randint(2, 4))) for _ in range(queries)]
    asked += [query_words(words.draw(words.rng.randint(8, 25))) for _ in range(queries)]
    times = await trio.to_thread.run_sync(lambda: [_recall(index, q) for q in asked])
    (short, short_90), (whole, whole_90) = _figures(times[:queries]), _figures(times[queries:])
    median = statistics.median(times)
    details = (
        f"{sessions:,} sessions of {turns} turns ({records:,} records, {logs / 1e6:,.0f} MB of "
        f"logs); the index made from nothing in {built:,.1f} s, {size / 1e6:,.0f} MB "
        f"({size / logs:.0%} of the logs).",
        f"A recall as brokerd answers one (the notes read up to date, the search, the index "
        f"closed): {queries} queries of 2 to 4 words, median {short:.1f} ms (p90 "
        f"{short_90:.1f}); {queries} whole user messages, as auto-recall asks, median "
        f"{whole:.1f} ms (p90 {whole_90:.1f}).",
    )
    return Row(
        figure="recall",
        result=f"{median:.1f} ms median over {sessions:,} sessions of {turns} turns",
        bar=f"≤ {BAR_RECALL_MS:g} ms median",
        met=median <= BAR_RECALL_MS,
        details=details,
    )


async def update_row(root: Path, *, sessions: int, turns: int, runs: int) -> Row:
    home, words, _built = await corpus(root, sessions, turns)
    store, index = Store(home, SystemClock()), RecallIndex(home)
    chosen = [f"s{words.rng.randrange(sessions):05d}" for _ in range(runs)]

    def one(sid: str, number: int) -> float:
        session = store.resume(SessionId(sid))
        session.append(*turn_records(words, turns + number))
        session.close()
        started = time.perf_counter()
        done = index.update_session(sid)
        index.close()
        if done.added < 2:
            raise BenchError(f"the index took {done.added} passages of a turn of {sid}")
        return (time.perf_counter() - started) * 1000

    times = await trio.to_thread.run_sync(lambda: [one(s, n) for n, s in enumerate(chosen, 1)])
    median, p90 = _figures(times)
    details = (
        f"A turn appended to one of {sessions:,} sessions (as loopd appends it), then the "
        f"session read into the index as brokerd does once loopd tells it (`session_changed`, "
        f"after `turn_done` went out: off the turn's path): median {median:.2f} ms, p90 "
        f"{p90:.2f} ms over {runs} turns, the index opened and closed each time.",
    )
    return Row(
        figure="recall index update",
        result=f"{median:.2f} ms a turn",
        bar=f"≤ {BAR_UPDATE_MS:g} ms, off the turn's path",
        met=median <= BAR_UPDATE_MS,
        details=details,
    )


async def rebuild_row(root: Path, *, records: int) -> Row:
    """A rebuild from nothing of a home of `records` log records (sessions of 100 turns)."""
    words = Words(random.Random(SEED + 1))
    home, written, number = root / "home", 0, 0
    while written < records:
        made = list(session_turns(words, 100))
        await write_session(home, f"r{number:05d}", made)
        written, number = written + len(made) + 1, number + 1
    index = RecallIndex(home)
    started = time.perf_counter()
    done = await trio.to_thread.run_sync(index.rebuild)
    seconds = time.perf_counter() - started
    index.close()
    logs, size, counted = _sizes(home)
    details = (
        f"{number} sessions of 100 turns, {counted:,} records ({logs / 1e6:,.1f} MB of logs): "
        f"`bxctl memory reindex`'s work, {done.added:,} passages in {seconds:.2f} s "
        f"({counted / seconds:,.0f} records a second); the index is {size / 1e6:,.1f} MB, "
        f"{size / logs:.0%} of the logs.",
    )
    return Row(
        figure="recall index rebuild",
        result=f"{seconds:.1f} s for {counted:,} records",
        bar="reported",
        met=True,
        details=details,
    )


async def autorecall_row(root: Path, *, sessions: int, turns: int, runs: int) -> Row:
    """Auto-recall through a real brokerd on the corpus: what a turn waits before its first
    request (loopd's `recall` frame, brokerd's search, the answer)."""
    _home, words, _built = await corpus(root, sessions, turns)
    with _open_brokerd(root) as (brokerd, config_path):  # its home: the corpus's, root/home
        port = BrokerPort(load_config(config_path).broker.socket, CALL_TIMEOUT_S)
        times, found, added = [], 0, []
        for number in range(runs):
            query = " ".join(query_words(words.draw(words.rng.randint(8, 25))))
            frame = RecallFrame(SessionId("bench"), query, number + 1, 1)
            started = time.perf_counter()
            answer = await port.auto_recall(frame)
            times.append((time.perf_counter() - started) * 1000)
            if not isinstance(answer, ResultResponse):
                raise BenchError(f"auto-recall failed: {answer}")
            if answer.content:
                found += 1
                added.append(len(answer.content))
        if brokerd.popen.poll() is not None:
            raise BenchError(f"brokerd ended during the row:\n{brokerd.err.text()}")
    median, p90 = _figures(times)
    size = f"{statistics.median(added):,.0f} characters" if added else "nothing"
    details = (
        f"{runs} user messages of the corpus asked of a real brokerd on its {sessions:,} "
        f"sessions (loopd's client, a connection a frame): median {median:.1f} ms, p90 "
        f"{p90:.1f} ms before the turn's first request can go out. {found} of {runs} "
        f"passed the threshold and were appended (median {size}, within [memory] "
        f"recall_tokens); the rest added nothing to the prompt.",
    )
    return Row(
        figure="auto-recall",
        result=f"{median:.1f} ms a turn",
        bar="reported",
        met=True,
        details=details,
    )
