"""`bxctl sessions`, `show`, `verify` and `rm`, on logs made by real turns (the fake server),
on damaged logs, and on a thousand sessions; `bxctl chat -c` and a mistyped `--session`."""

from __future__ import annotations

import io
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.cli import bxctl, chat_command
from boxmaker.cli.sessions import Output, remove, run_command, sessions, show, verify
from boxmaker.cli.table import ago, align, resolve, shorten
from boxmaker.clock import TickingClock
from boxmaker.session import Link, Problem, Taken, check_log, seal, turns_of
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import open_rig

LONG = "chat-20261129-213134-a1b2"


def output() -> Output:
    return Output(io.StringIO(), io.StringIO())


def text(out: Output) -> str:
    return out.out.getvalue()  # type: ignore[attr-defined,no-any-return]


def errors(out: Output) -> str:
    return out.err.getvalue()  # type: ignore[attr-defined,no-any-return]


async def make_sessions(home: Path) -> None:
    """Three sessions made by real turns: a plain one, one with a tool call, a long id."""
    script = [
        Reply(content="Hello."),
        Reply(tool_calls=(("clock", "{}"),)),
        Reply(content="It is late."),
        Reply(content="Bye."),
        Reply(content="First of many."),
    ]
    fake = FakeLlamaServer(script=script)
    clock = TickingClock()  # one clock: the sessions are made one after the other
    async with open_rig(home, fake, session="s1", clock=clock) as rig:
        await run(rig, "Hi there, this is a rather long first message that goes on and on.")
    async with open_rig(home, fake, session="s2", clock=clock) as rig:
        await run(rig, "What time is it?")
        await run(rig, "Bye.")
    async with open_rig(home, fake, session=LONG, clock=clock) as rig:
        await run(rig, "Many turns.")


async def run(rig: object, content: str) -> None:
    from boxmaker.loopd.loop import run_turn

    await run_turn(rig.session, rig.runtime, content, lambda _e: None)  # type: ignore[attr-defined]


@pytest.fixture
async def home(tmp_path: Path) -> Path:
    await make_sessions(tmp_path)
    return tmp_path


# --- listing -------------------------------------------------------------------------------


async def test_sessions_lists_the_most_recent_first_with_its_figures(home: Path) -> None:
    out = output()
    now = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
    assert sessions(home, out, as_json=False, now=now) == 0
    header, *lines = text(out).splitlines()
    assert re.split(r"  +", header) == [
        "ID", "CREATED", "LAST TURN", "TURNS", "TOKENS", "FIRST MESSAGE",
    ]  # fmt: skip
    rows = [re.split(r"  +", line.strip()) for line in lines]
    assert [row[0] for row in rows] == ["…a1b2", "s2", "s1"]  # the long id shortened
    assert [row[3] for row in rows] == ["1", "2", "1"]  # turns
    assert rows[2][5] == "Hi there, this is a rather long first message that goes on…"
    assert {row[1] for row in rows} == {"1 h ago"}  # made at 21:31 by the test's clock
    listed = [json.loads(line) for line in _json_listing(home)]
    assert [entry["session"] for entry in listed] == [LONG, "s2", "s1"]
    assert listed[1]["turns"] == 2
    assert listed[1]["done"] == 2
    assert listed[1]["tokens"] > 0
    assert listed[1]["first"] == "What time is it?"


def _json_listing(home: Path) -> list[str]:
    out = output()
    sessions(home, out, as_json=True, now=datetime.now(UTC))
    return text(out).splitlines()


async def test_a_session_without_an_index_is_listed_from_the_head_of_its_log(home: Path) -> None:
    (home / "sessions" / "s1" / "index.json").unlink()
    listed = [json.loads(line) for line in _json_listing(home)]
    s1 = next(e for e in listed if e["session"] == "s1")
    assert s1["first"].startswith("Hi there")
    assert "turns" not in s1


def test_a_thousand_sessions_list_from_their_indexes_alone(tmp_path: Path) -> None:
    """Every log here is a pipe nobody writes to: reading one would block forever, so the
    listing answering at all proves it read only the indexes."""
    root = tmp_path / "sessions"
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for number in range(1000):
        folder = root / f"chat-{number:04d}"
        folder.mkdir(parents=True)
        os.mkfifo(folder / "0.jsonl")
        moment = p.Timestamp(start + timedelta(minutes=number))
        index = {"session": folder.name, "created": str(moment), "last_turn": str(moment),
                 "turns": 3, "done": 3, "tokens": 1200, "first": f"question {number}",
                 "seq": 20, "hash": "0" * 64}  # fmt: skip
        (folder / "index.json").write_text(json.dumps(index))
    out = output()
    assert sessions(tmp_path, out, as_json=False, now=start + timedelta(days=1)) == 0
    rows = text(out).splitlines()[1:]
    assert len(rows) == 1000
    assert rows[0].startswith("chat-0999")
    assert rows[-1].startswith("chat-0000")


# --- show ----------------------------------------------------------------------------------


async def test_show_writes_the_conversation_as_a_person_reads_it(home: Path) -> None:
    out = output()
    assert show(home / "sessions" / "s2", out, mode="") == 0
    lines = text(out).splitlines()
    assert lines[0] == "> What time is it?"
    assert lines[1].startswith("[tool] clock {} -> 2026-11-29T")
    assert lines[2] == "It is late."
    assert lines[-3:] == ["> Bye.", "Bye.", ""]


async def test_show_stats_has_a_row_a_turn_and_the_totals(home: Path) -> None:
    out = output()
    assert show(home / "sessions" / "s2", out, mode="stats") == 0
    header, first, second, total = text(out).splitlines()
    assert header.split() == ["TURN", "OUTCOME", "COMPLETIONS", "TOOLS", "PROCESSED", "REUSED",
                              "REUSE", "GENERATED", "SECONDS"]  # fmt: skip
    assert first.split()[:4] == ["1", "done", "2", "1"]
    assert second.split()[:4] == ["2", "done", "1", "0"]
    cells = total.split()
    assert cells[:3] == ["all", "3", "1"]
    reused, processed = int(cells[4].replace(",", "")), int(cells[3].replace(",", ""))
    assert cells[5] == f"{reused / (reused + processed):.2f}"


async def test_show_exports_json_and_markdown(home: Path) -> None:
    out = output()
    assert show(home / "sessions" / "s2", out, mode="json") == 0
    exported = json.loads(text(out))
    assert exported["session"] == "s2"
    first = exported["turns"][0]
    assert first["user"] == "What time is it?"
    assert first["tools"][0]["name"] == "clock"
    assert first["answer"] == "It is late."
    assert first["end"]["outcome"] == "done"
    out = output()
    assert show(home / "sessions" / "s2", out, mode="markdown") == 0
    markdown = text(out)
    assert markdown.startswith("# Session s2\n")
    assert "\n## Turn 2 (" in markdown
    assert "\n> Bye.\n" in markdown


async def test_a_session_is_named_by_its_id_its_start_or_its_shortened_end(home: Path) -> None:
    for name in (LONG, "chat-2026", "a1b2", "…a1b2"):
        out = output()
        assert run_command(_args("show", session=name), {"BOXMAKER_HOME": str(home)}, out,
                           io.StringIO()) == 0, errors(out)  # fmt: skip
    out = output()
    assert run_command(_args("show", session="s"), {"BOXMAKER_HOME": str(home)}, out,
                       io.StringIO()) == 1  # fmt: skip
    assert "'s' names 2 sessions: s1, s2" in errors(out)
    out = output()
    assert run_command(_args("show", session="s3"), {"BOXMAKER_HOME": str(home)}, out,
                       io.StringIO()) == 1  # fmt: skip
    assert "no session 's3'" in errors(out)
    assert "; did you mean s2 or s1?" in errors(out)


def _args(command: str, **values: object) -> object:
    import argparse

    defaults = {"home": None, "json": False, "stats": False, "markdown": False, "yes": True,
                "all": False}  # fmt: skip
    return argparse.Namespace(command=command, **{**defaults, **values})


# --- verify --------------------------------------------------------------------------------


async def test_verify_passes_logs_made_by_real_turns(home: Path) -> None:
    out = output()
    assert verify(home, [], out) == 0
    lines = text(out).splitlines()
    assert len(lines) == 3
    assert all(line.startswith("ok ") and "chain whole" in line for line in lines)


async def test_verify_names_the_first_bad_line_of_each_log(home: Path) -> None:
    log = home / "sessions" / "s2" / "0.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"cache_n":', b'"cache_n":1')  # a changed byte, line 4
    log.write_bytes(b"".join(lines))
    out = output()
    assert verify(home, [], out) == 1
    failed = [line for line in text(out).splitlines() if line.startswith("FAIL")]
    assert failed == [f"FAIL s2: {log}:4: hash_mismatch: " + failed[0].split("hash_mismatch: ")[1]]
    assert [line.split()[1] for line in text(out).splitlines() if line.startswith("ok")] == [
        f"{LONG}:",
        "s1:",
    ]


async def test_verify_reports_a_log_that_lost_its_last_turn(home: Path) -> None:
    log = home / "sessions" / "s2" / "0.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    last_user = max(i for i, line in enumerate(lines) if b'"type":"user"' in line)
    log.write_bytes(b"".join(lines[:last_user]))  # the chain of what is left is whole
    out = output()
    assert verify(home, ["s2"], out) == 1
    assert "lines were cut off the end" in text(out)


def chained(records: list[p.LogRecord], genesis: str) -> bytes:
    """Lines as loopd writes them."""
    link, lines = Link(0, genesis), []
    for record in records:
        line, link = seal(p.dumps(record), link)
        lines.append(line)
    return b"".join(lines)


NOW = p.Timestamp.parse("2026-11-29T21:31:34.123456Z")
GENESIS = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
START = p.SessionStartRecord(NOW, p.SessionId("x"), 0, "main", GENESIS)
CALL = p.ToolCall("c1", "clock", "{}")
USAGE = p.UsageRecord(NOW, 10, 5, 3, 0, False)


def result(call_id: str = "c1") -> p.ToolResultRecord:
    return p.ToolResultRecord(NOW, 1, call_id, "now", p.DataClass.PUBLIC, False, False)


def end(completions: int, tools: int) -> p.TurnEndRecord:
    return p.TurnEndRecord(NOW, p.Outcome.DONE, completions, tools, 5 * completions,
                           10 * completions, 3 * completions, 9)  # fmt: skip


SOFT = p.BreakRecord(NOW, hard=False, at=p.BreakAt.STEP)
HARD = p.BreakRecord(NOW, hard=True, at=p.BreakAt.TOOL)


def broken() -> p.TurnEndRecord:
    return p.TurnEndRecord(NOW, p.Outcome.BREAK_HARD, 0, 0, 0, 0, 0, 9)


@pytest.mark.parametrize(
    ("records", "line", "says"),
    [
        (
            [START, p.UserRecord(NOW, "hi"), p.AssistantRecord(NOW, "a", None, None), end(1, 0)],
            3,
            "an assistant record without its usage",
        ),
        (
            [START, p.UserRecord(NOW, "hi"), result("nobody")],
            3,
            "a tool_result for 'nobody', which no call awaits",
        ),
        (
            [START, p.UserRecord(NOW, "hi"), p.UserRecord(NOW, "again")],
            3,
            "the turn at line 2 has no turn_end before this one",
        ),
        (
            [
                START,
                p.UserRecord(NOW, "hi"),
                p.AssistantRecord(NOW, None, None, (CALL,)),
                USAGE,
                result(),
                p.AssistantRecord(NOW, "ok", None, None),
                USAGE,
                end(2, 0),
            ],
            8,
            "the turn_end's figures are not the sums",
        ),
        ([START, end(0, 0)], 2, "a turn_end with no turn before it"),
        ([START, SOFT], 2, "a break with no turn before it"),
        (
            [
                START,
                p.UserRecord(NOW, "hi"),
                p.AssistantRecord(NOW, None, None, (CALL,)),
                USAGE,
                SOFT,
                p.UserRecord(NOW, "steer"),
            ],
            5,
            "a soft break before every tool call of its step has a result",
        ),
        ([START, p.UserRecord(NOW, "hi"), SOFT, end(0, 0)], 3, "without its message"),
        (
            [START, p.UserRecord(NOW, "hi"), HARD, p.AssistantRecord(NOW, "a", None, None)],
            4,
            "a 'assistant' record after the hard break at line 3",
        ),
        ([START, p.UserRecord(NOW, "hi"), HARD, end(0, 0)], 4, "saying done after the hard break"),
        ([START, p.UserRecord(NOW, "hi"), broken()], 3, "saying break_hard with no hard break"),
    ],
)
def test_verify_names_records_out_of_order(
    records: list[p.LogRecord], line: int, says: str
) -> None:
    problem = check_log(chained(records, GENESIS), Path("0.jsonl"), GENESIS, None)
    assert isinstance(problem, Problem), problem
    assert (problem.line, says in problem.reason) == (line, True), problem


def test_verify_passes_a_log_with_soft_and_hard_breaks_where_they_may_stand() -> None:
    records = [
        START,
        p.UserRecord(NOW, "What time is it?"),
        p.AssistantRecord(NOW, None, None, (CALL,)), USAGE, result(),
        SOFT, p.UserRecord(NOW, "In UTC."),  # taken at the step boundary: the same turn
        p.AssistantRecord(NOW, "It is now, in UTC.", None, None), USAGE,
        end(2, 1),
        p.UserRecord(NOW, "Clock again."),
        p.AssistantRecord(NOW, None, None, (CALL,)), USAGE,
        HARD, result(),  # stopped while its tool ran: closed after the break
        p.TurnEndRecord(NOW, p.Outcome.BREAK_HARD, 1, 1, 5, 10, 3, 9),
    ]  # fmt: skip
    log = check_log(chained(records, GENESIS), Path("0.jsonl"), GENESIS, None)
    assert not isinstance(log, Problem), log
    assert [turn.user for turn in turns_of(log.records)] == ["What time is it?", "Clock again."]
    assert turns_of(log.records)[0].taken == [Taken(after=1, content="In UTC.")]


# --- the property: any change is found, at its line ------------------------------------------

TURNS = [
    START,
    p.UserRecord(NOW, "What time is it? ünïcödé"),
    p.AssistantRecord(NOW, None, "Need the clock.", (CALL,)),
    USAGE,
    result(),
    p.AssistantRecord(NOW, "It is now.", None, None),
    USAGE,
    end(2, 1),
    p.UserRecord(NOW, "Thanks."),
    p.AssistantRecord(NOW, "You are welcome.", None, None),
    USAGE,
    end(1, 0),
]
LOG = chained(TURNS, GENESIS)
LINES = LOG.splitlines(keepends=True)


@settings(max_examples=300)
@given(st.integers(0, len(LOG) - 1), st.integers(0, 255))
def test_any_changed_byte_fails_verify_at_its_line(at: int, value: int) -> None:
    if LOG[at] == value:
        value = (value + 1) % 256
    changed = LOG[:at] + bytes([value]) + LOG[at + 1 :]
    line = LOG.count(b"\n", 0, at) + 1  # the line the byte is in (its newline included)
    problem = check_log(changed, Path("0.jsonl"), GENESIS, None)
    assert isinstance(problem, Problem), (at, value)
    assert problem.line == line, (at, value, problem)


def test_every_byte_of_every_line_is_covered() -> None:
    for at in range(len(LOG)):
        changed = LOG[:at] + bytes([LOG[at] ^ 1]) + LOG[at + 1 :]
        problem = check_log(changed, Path("0.jsonl"), GENESIS, None)
        assert isinstance(problem, Problem)
        assert problem.line == LOG.count(b"\n", 0, at) + 1, at


@given(st.integers(1, len(TURNS) - 2), st.text(min_size=1, max_size=20))
def test_a_forged_record_with_its_hash_recomputed_fails_at_the_next_line(
    at: int, forged: str
) -> None:
    prev = Link(at, LINES[at - 1][-67:-3].decode())  # the hash of the line before it
    line, _ = seal(p.dumps(p.UserRecord(NOW, forged)), prev)
    changed = b"".join([*LINES[:at], line, *LINES[at + 1 :]])
    problem = check_log(changed, Path("0.jsonl"), GENESIS, None)
    assert isinstance(problem, Problem)
    if line == LINES[at]:
        return  # the same record again
    assert (problem.line, problem.reason.split(":")[0]) == (at + 2, "prev_mismatch"), problem


def test_a_removed_middle_line_is_a_seq_gap() -> None:
    changed = b"".join([*LINES[:4], *LINES[5:]])
    problem = check_log(changed, Path("0.jsonl"), GENESIS, None)
    assert isinstance(problem, Problem)
    assert (problem.line, problem.reason.split(":")[0]) == (5, "seq_gap")


# --- rm ------------------------------------------------------------------------------------


async def test_rm_is_refused_while_loopd_is_in_a_turn_on_the_session(home: Path) -> None:
    from boxmaker.clock import TickingClock
    from boxmaker.store import Store

    held = Store(home, TickingClock()).resume(p.SessionId("s1"))
    assert held.hold()  # as loopd does for a turn
    out = output()
    assert remove(home / "sessions" / "s1", out, ask=False, answer=io.StringIO()) == 1
    assert "session s1 is in a turn" in errors(out)
    held.release()
    held.close()
    out = output()
    assert remove(home / "sessions" / "s1", out, ask=True, answer=io.StringIO("n\n")) == 1
    assert (home / "sessions" / "s1").is_dir()
    assert remove(home / "sessions" / "s1", out, ask=True, answer=io.StringIO("y\n")) == 0
    assert sorted(os.listdir(home / "sessions")) == [LONG, "s2"]


async def test_loopd_does_not_use_a_session_removed_between_turns(tmp_path: Path) -> None:
    from ..daemon.test_service import one_turn, open_daemon, turn

    fake = FakeLlamaServer(default=Reply(content="ok"))
    async with open_daemon(tmp_path, fake) as daemon:
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)
        out = output()
        assert remove(tmp_path / "sessions" / "s1", out, ask=False, answer=io.StringIO()) == 0
        final = (await one_turn(daemon, turn(resume=True)))[-1]
        assert isinstance(final, p.WireError)
        assert final.code is p.ErrorCode.NO_SUCH_SESSION  # not a turn written to a removed file


# --- chat -c and --session -----------------------------------------------------------------


async def test_chat_continue_takes_the_most_recent_session(home: Path) -> None:
    args = bxctl.build_parser().parse_args(["chat", "-c", "--home", str(home)])
    assert chat_command.chosen_session(args, {}) == LONG


async def test_a_mistyped_session_is_an_error_naming_the_closest(home: Path) -> None:
    args = bxctl.build_parser().parse_args(["chat", "--session", "s3", "--home", str(home)])
    with pytest.raises(chat_command.NoSession, match=r"no session 's3' .*did you mean s2 or s1"):
        chat_command.chosen_session(args, {})
    args = bxctl.build_parser().parse_args(["chat", "--session", "s3", "--new", "--home",
                                            str(home)])  # fmt: skip
    assert chat_command.chosen_session(args, {}) == "s3"


# --- the table -----------------------------------------------------------------------------


def test_times_ids_and_columns() -> None:
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    assert [ago(now - timedelta(seconds=s), now) for s in (3, 42, 300, 10800, 172800)] == [
        "just now", "42 s ago", "5 min ago", "3 h ago", "2 d ago",
    ]  # fmt: skip
    assert ago(now - timedelta(days=40), now) == "2026-10-20"
    ids = ["chat-20261129-213134-a1b2", "chat-20261129-220000-c3d4", "s1"]
    assert shorten(ids) == {ids[0]: "…a1b2", ids[1]: "…c3d4", "s1": "s1"}
    assert shorten(["x" * 30 + "abcd", "y" * 30 + "abcd"]) == {
        "x" * 30 + "abcd": "…xabcd", "y" * 30 + "abcd": "…yabcd"
    }  # fmt: skip
    assert resolve("…a1b2", ids) == [ids[0]]
    assert resolve("chat", ids) == ids[:2]
    rows = [["a", "10", "x"], ["bbb", "2", "yy"]]
    assert align(rows, right=[1]) == ["a    10  x", "bbb   2  yy"]


def test_show_stats_counts_the_cache_losses_by_cause() -> None:
    from boxmaker.cli.conversation import losses
    from boxmaker.session import turns_of

    t = p.Timestamp(datetime(2026, 11, 29, tzinfo=UTC))
    records: list[p.LogRecord] = [
        p.UserRecord(t, "One."),
        p.CacheLossRecord(t, 100, 0),  # written before causes
        p.UserRecord(t, "Two."),
        p.CacheLossRecord(t, 120, 0, p.LossCause.SERVER_RESTARTED, "x"),
        p.UserRecord(t, "Three."),
        p.CacheLossRecord(t, 140, 0, p.LossCause.SERVER_RESTARTED, "x"),
        p.CacheLossRecord(t, 150, 9, p.LossCause.SLOT_TAKEN, "y"),
    ]
    assert list(losses(turns_of(records))) == [
        "cache losses: 4 (server_restarted 2, slot_taken 1, unknown 1)"
    ]
    assert list(losses(turns_of(records[:1]))) == []
