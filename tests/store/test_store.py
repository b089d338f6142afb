"""The store: create, append, resume, refusals, the baseline on disk, healing, durability."""

from __future__ import annotations

import errno
import gc
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
import trio

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.loopd.loop import write
from boxmaker.session import (
    INTERRUPTED,
    UNKNOWN_OUTCOME,
    BaselineMismatch,
    NoSuchSession,
    SessionExists,
    StorageError,
    TornLog,
    assemble_baseline,
    baseline_bytes,
    parse_log,
    sha256_hex,
)
from boxmaker.store import FileSystem, Store, core_only, read_baseline
from boxmaker.store.store import _collection_paused
from boxmaker.tools import CORE_TOOLS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sessions"
SID = p.SessionId("chat-1")
BASELINE = assemble_baseline("You are Boxmaker, in a test.\n", None)

BASELINE_FILE, LOG_FILE = "0.baseline.json", "0.jsonl"  # epoch 0's files, as on disk


def store_at(home: Path, fs: FileSystem | None = None) -> Store:
    return Store(home, TickingClock(), fs)


def user(text: str) -> p.UserRecord:
    return p.UserRecord(time=p.Timestamp.parse("2026-11-29T22:00:00.000000Z"), content=text)


async def test_create_writes_the_baseline_and_session_start(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    session = store.create(SID, BASELINE, "main")
    folder = tmp_path / "sessions" / "chat-1"
    assert sorted(os.listdir(folder)) == [BASELINE_FILE, LOG_FILE]
    assert os.listdir(tmp_path / "sessions") == ["chat-1"]  # no staging folder left
    data = (folder / BASELINE_FILE).read_bytes()
    assert data == baseline_bytes(BASELINE)
    [line] = (folder / LOG_FILE).read_bytes().splitlines(keepends=True)
    assert f'"seq":1,"prev":"{sha256_hex(data)}","hash":"'.encode() in line  # chained
    [start] = parse_log(line, folder / LOG_FILE, sha256_hex(data)).records
    assert start == p.SessionStartRecord(
        time=start.time, session=SID, epoch=0, slot="main", baseline=sha256_hex(data)
    )
    assert list(session.records) == [start]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / LOG_FILE).stat().st_mode) == 0o600
    session.close()


async def test_creating_a_session_twice_is_refused(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    (store.create(SID, BASELINE, "main")).close()
    with pytest.raises(SessionExists, match="session chat-1 already exists"):
        store.create(SID, BASELINE, "main")


async def test_resuming_a_missing_session_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NoSuchSession, match="no session nope"):
        store_at(tmp_path).resume(p.SessionId("nope"))


async def test_appended_records_resume_exactly(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    session = store.create(SID, BASELINE, "main")
    clock = TickingClock()
    records: list[p.LogRecord] = [
        p.UserRecord(time=clock.now(), content="What time is it? ✓"),
        p.AssistantRecord(
            time=clock.now(),
            content=None,
            reasoning_content="Clock.",
            tool_calls=(p.ToolCall(id="a1", name="clock", arguments="{}"),),
        ),
        p.UsageRecord(clock.now(), 0, 50, 9, 2, False),
        p.ToolResultRecord(
            clock.now(), session.state.next_call, "a1", "noon", p.DataClass.PUBLIC, False, False
        ),
    ]
    for record in records:
        session.append(record)
    before = session.request_messages()
    session.close()
    resumed = store.resume(SID)
    assert list(resumed.records[1:]) == records
    assert resumed.request_messages() == before
    assert resumed.state.next_call == 2
    assert resumed.last_usage() == records[2]
    assert resumed.baseline == BASELINE
    resumed.close()


async def test_golden_sessions_resume_to_their_records_and_messages() -> None:
    store = store_at(FIXTURES.parent)
    plain = store.resume(p.SessionId("chat-plain"))
    assert [type(r).__name__ for r in plain.records] == [
        "SessionStartRecord", "UserRecord", "AssistantRecord", "UsageRecord",
        "ToolResultRecord", "AssistantRecord", "UsageRecord",
    ]  # fmt: skip
    call = p.ToolCall(id="callA", name="clock", arguments="{}")
    assert plain.request_messages() == (
        p.SystemMessage("You are Boxmaker, in a test."),
        p.UserMessage("What time is it?"),
        p.AssistantMessage(content="", reasoning_content="Need the clock.", tool_calls=(call,)),
        p.ToolMessage(tool_call_id="callA", content="2026-11-29T21:31:36.400000Z"),
        p.AssistantMessage(content="It is 21:31 UTC."),
    )
    assert p.dumps(plain.request_messages()[2]) == (
        b'{"role":"assistant","content":"","reasoning_content":"Need the clock.","tool_calls":'
        b'[{"id":"callA","type":"function","function":{"name":"clock","arguments":"{}"}}]}'
    )
    assert plain.state.next_call == 2
    assert plain.last_usage() == plain.records[-1]
    plain.close()
    dangling = store.resume(p.SessionId("chat-dangling"))
    assert dangling.state.next_call == 8  # one more than the highest call in the log
    dangling.close()


async def test_dangling_tool_calls_are_healed_once_each(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "chat-dangling", tmp_path / "sessions" / "chat-dangling")
    store = store_at(tmp_path)
    session = store.resume(p.SessionId("chat-dangling"))
    healed = session.heal(TickingClock().now())
    assert [(r.call, r.tool_call_id, r.content) for r in healed] == [(8, "callC", INTERRUPTED)]
    assert session.heal(TickingClock().now()) == []
    session.close()
    resumed = store.resume(p.SessionId("chat-dangling"))
    calls = {
        c.id
        for m in resumed.request_messages()
        if isinstance(m, p.AssistantMessage)
        for c in m.tool_calls or ()
    }
    answered = {m.tool_call_id for m in resumed.request_messages() if isinstance(m, p.ToolMessage)}
    assert calls == answered == {"callB", "callC"}
    assert resumed.state.next_call == 9
    resumed.close()


async def test_a_call_that_was_sent_is_healed_as_outcome_unknown_never_as_not_run(
    tmp_path: Path,
) -> None:
    # loopd died with two calls open: the first had gone to brokerd (its call_sent record),
    # the second had not. Resume tells them apart; neither is run again.
    store = store_at(tmp_path)
    clock = TickingClock()
    session = store.create(p.SessionId("s"), assemble_baseline("You are X.", None), "main")
    calls = (p.ToolCall("sent", "clock", "{}"), p.ToolCall("unsent", "clock", "{}"))
    session.append(
        p.UserRecord(clock.now(), "Time, twice."),
        p.AssistantRecord(clock.now(), None, None, calls),
        p.UsageRecord(clock.now(), 0, 10, 2, 0, False),
        p.CallSentRecord(clock.now(), 1, "sent"),
    )
    session.close()
    resumed = store.resume(p.SessionId("s"))
    healed = resumed.heal(clock.now())
    results = [
        (r.call, r.tool_call_id, r.content) for r in healed if isinstance(r, p.ToolResultRecord)
    ]
    assert results == [(1, "sent", UNKNOWN_OUTCOME), (2, "unsent", INTERRUPTED)]
    assert resumed.state.next_call == 3
    resumed.close()


async def test_a_session_without_dangling_calls_needs_no_healing() -> None:
    session = store_at(FIXTURES.parent).resume(p.SessionId("chat-plain"))
    assert session.heal(TickingClock().now()) == []
    session.close()


async def test_editing_system_md_changes_nothing_in_a_resumed_session(tmp_path: Path) -> None:
    system = tmp_path / "system.md"
    system.write_text("You are Boxmaker.\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "core.md").write_text("The owner likes tea.\n")
    baseline = read_baseline(system, core_only(tmp_path)())
    assert baseline.system == "You are Boxmaker.\n\nThe owner likes tea."
    assert baseline.tools == CORE_TOOLS
    store = store_at(tmp_path)
    session = store.create(SID, baseline, "main")
    session.append(user("hi"))
    before = session.request_messages()
    session.close()
    system.write_text("You are someone else entirely.\n")
    resumed = store.resume(SID)
    assert resumed.request_messages() == before
    assert resumed.baseline == baseline
    resumed.close()


def test_the_baseline_without_core_memory_is_the_system_text(tmp_path: Path) -> None:
    system = tmp_path / "system.md"
    system.write_text("Hello.\n\n")
    assert read_baseline(system, core_only(tmp_path)()).system == "Hello."
    with pytest.raises(StorageError, match=re.escape("nope.md")):
        read_baseline(tmp_path / "nope.md", "")


async def test_a_baseline_edited_on_disk_is_refused_with_both_hashes(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    (store.create(SID, BASELINE, "main")).close()
    path = store.folder(SID) / BASELINE_FILE
    recorded = sha256_hex(path.read_bytes())
    path.write_bytes(path.read_bytes().replace(b"test", b"tost"))
    with pytest.raises(BaselineMismatch) as caught:
        store.resume(SID)
    message = str(caught.value)
    assert recorded in message
    assert sha256_hex(path.read_bytes()) in message
    assert str(path) in message


def log_lines(tmp_path: Path, tail: bytes) -> tuple[Path, bytes]:
    source = (FIXTURES / "chat-plain" / LOG_FILE).read_bytes()
    folder = tmp_path / "sessions" / "chat-plain"
    shutil.copytree(FIXTURES / "chat-plain", folder)
    log = folder / LOG_FILE
    log.write_bytes(source + tail)
    return log, source + tail


@pytest.mark.parametrize(
    ("tail", "line", "reason"),
    [
        (
            b'{"type":"telepathy","time":"2026-11-29T21:31:38.000000Z"}\n',
            8,
            "unknown type 'telepathy'",
        ),
        (b"not json\n", 8, "not JSON"),
        (b"\n", 8, "not JSON"),
    ],
)
async def test_a_bad_last_line_is_refused_naming_file_and_line(
    tmp_path: Path, tail: bytes, line: int, reason: str
) -> None:
    log, data = log_lines(tmp_path, tail)
    with pytest.raises(TornLog) as caught:
        store_at(tmp_path).resume(p.SessionId("chat-plain"))
    assert (caught.value.path, caught.value.line) == (log, line)
    assert reason in caught.value.reason
    assert f"{log}, line {line}: " in str(caught.value)
    assert log.read_bytes() == data  # nothing repaired


USER = b'{"type":"user","time":"2026-11-29T21:31:38.000000Z","content":"Again?"}\n'
ANSWER = (b'{"type":"assistant","time":"2026-11-29T21:31:39.000000Z","content":"Yes.",'
          b'"reasoning_content":null,"tool_calls":null}\n')  # fmt: skip
USAGE = (b'{"type":"usage","time":"2026-11-29T21:31:39.000001Z","cache_n":153,"prompt_n":9,'
         b'"predicted_n":2,"reasoning_tokens":0,"thinking_capped":false}\n')  # fmt: skip
LOSS = b'{"type":"cache_loss","time":"2026-11-29T21:31:39.000002Z","expected":153,"got":0}\n'


@pytest.mark.parametrize(
    ("finished", "unfinished", "records"),
    [
        (b"", USER[:30], 0),  # the user message, cut
        (b"", USER[:-1], 0),  # all of it but its newline
        (USER, ANSWER + USAGE[:40], 1),  # an answer whose usage was cut: both go
        (USER, ANSWER[:-1], 0),
        (USER + ANSWER + USAGE, LOSS[:20], 0),  # the answer and usage stay, the loss goes
    ],
)
async def test_a_last_write_cut_short_is_set_aside_and_the_session_goes_on(
    tmp_path: Path, finished: bytes, unfinished: bytes, records: int
) -> None:
    """kill -9 can cut a write short (the kernel stops copying at a page boundary for a
    fatal signal): that write was never fsynced, so never acknowledged. Resume keeps its
    bytes in a file beside the log, says so, and goes on from the write before."""
    log, data = log_lines(tmp_path, finished + unfinished)
    whole = data[: len(data) - len(unfinished)]
    session = store_at(tmp_path).resume(p.SessionId("chat-plain"))
    aside = session.set_aside
    assert aside is not None
    assert aside.path == log.with_name(f"0.jsonl.torn-{len(whole)}")
    assert (aside.size, aside.records) == (len(unfinished), records)
    assert aside.path.read_bytes() == unfinished
    assert log.read_bytes() == whole
    assert len(session.records) == 7 + len(finished.splitlines())
    session.append(user("after the crash"))
    session.close()
    again = store_at(tmp_path).resume(p.SessionId("chat-plain"))
    assert again.set_aside is None
    assert again.records[-1] == user("after the crash")
    again.close()


async def test_a_log_without_a_whole_line_is_refused(tmp_path: Path) -> None:
    log, data = log_lines(tmp_path, b"")
    log.write_bytes(data[:50])
    with pytest.raises(TornLog, match="line 1: the last line has no newline"):
        store_at(tmp_path).resume(p.SessionId("chat-plain"))
    assert log.read_bytes() == data[:50]


async def test_a_set_aside_that_cannot_be_written_changes_nothing(tmp_path: Path) -> None:
    log, data = log_lines(tmp_path, USER[:30])
    store = Store(tmp_path, TickingClock(), FailingFS(fail_at=2))  # the set-aside file (1: the log)
    with pytest.raises(StorageError, match=r"0\.jsonl\.torn-\d+: No space left"):
        store.resume(p.SessionId("chat-plain"))
    assert log.read_bytes() == data
    assert sorted(os.listdir(log.parent)) == ["0.baseline.json", "0.jsonl"]


async def test_a_bad_middle_line_is_refused_too(tmp_path: Path) -> None:
    log, _ = log_lines(tmp_path, b"")
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"cache_n":0', b'"cache_n":"zero"')
    log.write_bytes(b"".join(lines))
    with pytest.raises(TornLog, match=r"line 4: not a log record: expected int @ \$\.cache_n"):
        store_at(tmp_path).resume(p.SessionId("chat-plain"))
    assert log.read_bytes() == b"".join(lines)


async def test_a_second_session_start_is_refused(tmp_path: Path) -> None:
    log, _ = log_lines(tmp_path, b"")
    first = log.read_bytes().splitlines(keepends=True)[0]
    log.write_bytes(log.read_bytes() + first)
    with pytest.raises(TornLog, match="line 8: only the first line may be session_start"):
        store_at(tmp_path).resume(p.SessionId("chat-plain"))


async def test_stale_staging_folders_are_swept(tmp_path: Path) -> None:
    (tmp_path / "sessions" / ".new-chat-9-abcd").mkdir(parents=True)
    store = store_at(tmp_path)
    assert store.sweep() == [".new-chat-9-abcd"]
    assert os.listdir(tmp_path / "sessions") == []


# --- durability: a failure at any point of create or append ----------------------------------


class FailingFS(FileSystem):
    """Fails the `fail_at`-th file operation (1-based) with a full disk, or, with `short`,
    makes that operation a write that takes half its bytes, as a disk does when it fills up
    mid-write (the next write then fails)."""

    def __init__(self, fail_at: int, short: bool = False) -> None:
        self.fail_at = fail_at
        self.short = short
        self.calls = 0
        self.full = False

    def _fails(self) -> bool:
        self.calls += 1
        return self.calls == self.fail_at

    def _full(self) -> OSError:
        return OSError(errno.ENOSPC, "No space left on device")

    def mkdir(self, path: Path) -> None:
        if self._fails():
            raise self._full()
        super().mkdir(path)

    def create(self, path: Path) -> int:
        if self._fails():
            raise self._full()
        return super().create(path)

    def open_append(self, path: Path) -> int:
        if self._fails():
            raise self._full()
        return super().open_append(path)

    def write(self, fd: int, data: bytes) -> int:
        if self._fails() or self.full:
            if not self.short or self.full:
                self.full = False
                raise self._full()
            self.full = True
            return super().write(fd, data[: len(data) // 2])
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        if self._fails():
            raise self._full()
        super().fsync(fd)

    def fsync_dir(self, path: Path) -> None:
        if self._fails():
            raise self._full()
        super().fsync_dir(path)

    def rename(self, source: Path, target: Path) -> None:
        if self._fails():
            raise self._full()
        super().rename(source, target)


async def count_ops(make: object) -> int:
    fs = FailingFS(fail_at=0)
    await make(fs)  # type: ignore[operator]
    return fs.calls


@pytest.mark.parametrize("short", [False, True])
async def test_a_failure_at_any_point_of_create_leaves_no_half_session(
    tmp_path: Path, short: bool
) -> None:
    async def make(fs: FileSystem, home: Path = tmp_path / "count") -> None:
        (Store(home, TickingClock(), fs).create(SID, BASELINE, "main")).close()

    total = await count_ops(make)
    assert total >= 9
    for fail_at in range(1, total + 1):
        home = tmp_path / f"home{fail_at}"
        store = Store(home, TickingClock(), FailingFS(fail_at, short=short))
        with pytest.raises(StorageError, match="No space left"):
            store.create(SID, BASELINE, "main")
        left = os.listdir(home / "sessions") if (home / "sessions").exists() else []
        assert left in ([], ["chat-1"]), (fail_at, left)
        if left:
            (store_at(home).resume(SID)).close()


@pytest.mark.parametrize("short", [False, True])
async def test_a_failed_append_leaves_the_log_at_a_record_boundary(
    tmp_path: Path, short: bool
) -> None:
    store = store_at(tmp_path)
    (store.create(SID, BASELINE, "main")).close()
    log = store.folder(SID) / LOG_FILE
    for fail_at in (2, 3):  # the write, then the fsync (1 is resume's open)
        fs = FailingFS(fail_at, short=short)
        session = Store(tmp_path, TickingClock(), fs).resume(SID)
        before = log.read_bytes()
        with pytest.raises(StorageError, match=re.escape(str(log))):
            session.append(user(f"lost {fail_at}"))
        assert log.read_bytes() == before
        session.append(user(f"kept {fail_at}"))  # the session stays usable
        session.close()
    resumed = store.resume(SID)
    assert [r.content for r in resumed.records[1:]] == ["kept 2", "kept 3"]  # type: ignore[union-attr]
    resumed.close()


async def test_an_append_is_one_write_then_one_fsync(tmp_path: Path) -> None:
    fs = FailingFS(fail_at=0)  # counts operations, fails none
    store = store_at(tmp_path, fs)
    session = store.create(SID, BASELINE, "main")
    fs.calls = 0
    session.append(user("now"), user("and now"))
    assert fs.calls == 2  # the write of both lines, then their fsync
    assert session.request_messages()[-1] == p.UserMessage("and now")
    session.close()
    resumed = store.resume(SID)
    assert list(resumed.records[1:]) == [user("now"), user("and now")]
    resumed.close()


async def test_a_failed_fsync_cuts_the_log_back_and_the_session_goes_on(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    (store.create(SID, BASELINE, "main")).close()
    log = store.folder(SID) / LOG_FILE
    durable = log.read_bytes()
    session = Store(tmp_path, TickingClock(), FailingFS(fail_at=3)).resume(SID)
    with pytest.raises(StorageError, match=re.escape(str(log))):
        session.append(user("written, never durable"))  # op 2 the write, op 3 the fsync
    assert log.read_bytes() == durable
    assert list(session.records[1:]) == []
    session.append(user("after"))
    session.close()
    resumed = store.resume(SID)
    assert list(resumed.records[1:]) == [user("after")]
    resumed.close()


async def test_a_cancel_pending_before_an_append_writes_nothing(tmp_path: Path) -> None:
    # The write itself is synchronous, so a cancel can never land half-way through a record;
    # a turn writes through `loop.write`, which raises a pending cancel first.
    store = store_at(tmp_path)
    session = store.create(SID, BASELINE, "main")
    with trio.CancelScope() as scope:
        scope.cancel()
        await write(session, user("never written"))
    assert scope.cancelled_caught
    assert list(session.records[1:]) == []
    session.append(user("written"))
    session.close()
    resumed = store.resume(SID)
    assert list(resumed.records[1:]) == [user("written")]
    resumed.close()


async def test_records_of_one_step_go_out_in_one_write(tmp_path: Path) -> None:
    class Counting(FileSystem):
        writes = 0

        def write(self, fd: int, data: bytes) -> int:
            Counting.writes += 1
            return super().write(fd, data)

    store = store_at(tmp_path)
    (store.create(SID, BASELINE, "main")).close()
    session = Store(tmp_path, TickingClock(), Counting()).resume(SID)
    session.append(user("a"), user("b"), user("c"))
    assert Counting.writes == 1
    assert [r.content for r in session.records[1:]] == ["a", "b", "c"]  # type: ignore[union-attr]
    session.close()


def test_the_collector_is_on_again_once_every_overlapping_read_is_done() -> None:
    """Resumes run in worker threads and overlap: the collector stays off while any reads,
    and is on again after the last, in whatever order they end."""
    assert gc.isenabled()
    for last in ("first", "second"):
        first, second = _collection_paused(), _collection_paused()
        first.__enter__()
        second.__enter__()
        assert not gc.isenabled()
        ends = [first, second] if last == "second" else [second, first]
        ends[0].__exit__(None, None, None)
        assert not gc.isenabled()
        ends[1].__exit__(None, None, None)
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0


async def test_a_turn_loopd_was_killed_in_is_closed_by_the_next_turn(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    session = store.create(SID, BASELINE, "main")
    call = p.ToolCall("callK", "clock", "{}")
    at = p.Timestamp.parse("2026-11-29T22:00:00.000000Z")
    usage = p.UsageRecord(at, 5, 100, 7, 0, False)
    session.append(user("now"), p.AssistantRecord(at, None, None, (call,)), usage)
    session.close()  # killed here: the call has no result, the turn no turn_end
    resumed = store.resume(SID)
    later = p.Timestamp.parse("2026-11-29T22:00:02.500000Z")
    healed = resumed.heal(later)
    assert [type(r) for r in healed] == [p.ToolResultRecord, p.TurnEndRecord]
    assert healed[0].content == INTERRUPTED  # type: ignore[union-attr]
    assert healed[1] == p.TurnEndRecord(later, p.Outcome.INTERRUPTED, 1, 1, 100, 5, 7, 2500)
    assert resumed.heal(later) == []  # closed once
    assert resumed.index.turns == 1
    resumed.close()
    again = store.resume(SID)
    assert again.records[-1] == healed[1]
    again.close()


async def test_a_sessions_identity_is_its_first_line_through_epochs_and_not_its_id(
    tmp_path: Path,
) -> None:
    store = store_at(tmp_path)
    session = store.create(SID, BASELINE, "main")
    log = tmp_path / "sessions" / "chat-1" / LOG_FILE
    first = log.read_bytes()
    assert session.identity == sha256_hex(first)
    now = p.Timestamp.parse("2026-11-29T22:00:00.000000Z")
    session.append(p.EpochEndRecord(now, 0, "Nothing yet.", 1, 0, 0, 1))
    session.begin_epoch(now)
    session.close()
    again = store.resume(SID)  # in epoch 1, whose first line is another
    assert again.epoch == 1
    assert again.identity == sha256_hex(first)
    again.close()
    # Removed, and made again under the same id with the same baseline: another session.
    shutil.rmtree(tmp_path / "sessions" / "chat-1")
    other = store.create(SID, BASELINE, "main")
    assert other.identity == sha256_hex(log.read_bytes()) != sha256_hex(first)
    other.close()
