"""The recall index: what it holds of the logs and the notes, and where each passage came
from; brought up to date a part at a time; and never the truth: a damaged, deleted, stale
or outdated index is made again from the files and answers the same."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import attrs
import pytest

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.memory import NotesFile, remembered, withdrawn
from boxmaker.memory.entries import Cursor, log_entries
from boxmaker.memory.index import RecallIndex, Updated
from boxmaker.memory.query import Match, query_words
from boxmaker.memory.sources import _cursor
from boxmaker.session import (
    LEGACY_PREFACE,
    SUMMARY_REPLY,
    Exposed,
    assemble_baseline,
    decided_parts,
    header,
    opening_summaries,
    preface,
    turn_end,
)
from boxmaker.store import OpenSession, Store, remove_session

NOW = p.Timestamp.parse("2026-12-04T10:00:00.000000Z")


def turn(
    session: OpenSession,
    asked: str,
    answer: str,
    results: tuple[tuple[str, str, bool, p.DataClass], ...] = (),
) -> None:
    """A whole turn appended as loopd writes one: the user's message, a completion calling
    each tool of `results` (name, content, untrusted, class), their results, the answer."""
    time = NOW
    records: list[p.LogRecord] = [p.UserRecord(time, asked)]
    if results:
        calls = tuple(p.ToolCall(f"c{n}", name, "{}") for n, (name, *_r) in enumerate(results))
        records += [p.AssistantRecord(time, None, None, calls),
                    p.UsageRecord(time, 0, 10, 2, 0, False)]  # fmt: skip
        first = session.state.next_call
        records += [
            p.ToolResultRecord(time, first + n, f"c{n}", content, data_class, untrusted, False)
            for n, (_name, content, untrusted, data_class) in enumerate(results)
        ]
    records += [
        p.AssistantRecord(time, answer, None, None),
        p.UsageRecord(time, 0, 10, 2, 0, False),
    ]
    records.append(turn_end(records, time, p.Outcome.DONE, 5))
    session.append(*records)


def made(home: Path, sid: str) -> OpenSession:
    store = Store(home, TickingClock())
    return store.create(p.SessionId(sid), assemble_baseline("You are Boxmaker.", ""), "main")


def search(index: RecallIndex, text: str, **where: object) -> list[Match]:
    return index.search(query_words(text), 10, **where).hits  # type: ignore[arg-type]


def found(hits: list[Match]) -> list[tuple[str, str | None, int | None]]:
    return [(hit.kind, hit.session, hit.turn) for hit in hits]


def test_every_session_s_words_are_found_with_where_they_were_said(tmp_path: Path) -> None:
    one = made(tmp_path, "one")
    turn(one, "What is the weather in Lisbon?", "It is sunny in Lisbon today.")
    turn(one, "Read the notes file", "The notes say to buy saffron.",
         (("read_file", "buy saffron and Lisbon tiles", True, p.DataClass.PRIVATE),))  # fmt: skip
    two = made(tmp_path, "two")
    turn(two, "Plan a trip to Porto", "Porto in spring is lovely.")
    index = RecallIndex(tmp_path)
    assert index.counts() == {"sources": 0}  # made empty at its first use, then filled
    assert index.update() == Updated(added=7, read=2)
    assert index.counts() == {"user": 3, "assistant": 3, "tool": 1, "sources": 2}
    assert index.update() == Updated()  # and then up to date
    hits = search(index, "lisbon")
    assert sorted(found(hits)) == [("assistant", "one", 1), ("tool", "one", 2), ("user", "one", 1)]
    tool = next(hit for hit in hits if hit.kind == "tool")
    assert (tool.tool, tool.untrusted, tool.time) == ("read_file", True, str(NOW))
    assert found(search(index, "porto spring")) == [("assistant", "two", 1), ("user", "two", 1)]
    assert search(index, "porto spring")[0].matched == 2  # it holds both words
    one.close()
    two.close()


def test_an_update_reads_only_what_was_appended_since(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "first message about kayaks", "kayaks are fun")
    index = RecallIndex(tmp_path)
    index.update()
    turn(session, "second message about canoes", "canoes too")
    done = index.update_session("s")
    assert (done.added, done.read) == (2, 1)
    assert index.update_session("s").read == 0  # nothing new: not even parsed
    assert sorted(found(search(index, "canoes"))) == [("assistant", "s", 2), ("user", "s", 2)]
    assert index.counts() == {"user": 2, "assistant": 2, "sources": 1}
    session.close()


def test_what_must_not_travel_is_not_indexed(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "run it", "done", (
        ("shell", "the password is hunter2", False, p.DataClass.SECRET),
        ("recall", "Memory holds 1 passage on hunter2", False, p.DataClass.PRIVATE),
    ))  # fmt: skip
    index = RecallIndex(tmp_path)
    index.update()
    assert search(index, "hunter2") == []  # a secret result, and recall's own echo
    session.close()


def test_an_epoch_s_carried_turns_are_found_once_and_each_summary_is_found(
    tmp_path: Path,
) -> None:
    session = made(tmp_path, "s")
    turn(session, "the falcon flew north", "noted")
    turn(session, "the heron stayed", "noted")
    session.append(p.EpochEndRecord(NOW, 0, "We spoke of a falcon and a heron.", 9, 0, 0, 1))
    session.begin_epoch(NOW)
    turn(session, "and the owl?", "it slept")
    index = RecallIndex(tmp_path)
    index.update()
    # Said in epoch 0, carried to epoch 1: once, and in the summary of epoch 0.
    assert sorted(found(search(index, "heron"))) == [("summary", "s", None), ("user", "s", 2)]
    assert found(search(index, "owl")) == [("user", "s", 3)]
    summaries = [hit for hit in search(index, "falcon") if hit.kind == "summary"]
    assert [(hit.summary, hit.session) for hit in summaries] == [("1:0:0", "s")]
    session.close()


@pytest.mark.parametrize("damage", ["garbage", "deleted", "stale", "truncated", "no_table"])
def test_a_damaged_deleted_or_stale_index_is_rebuilt_and_answers_the_same(
    tmp_path: Path, damage: str
) -> None:
    session = made(tmp_path, "s")
    turn(session, "the lighthouse keeper wrote a letter", "a long letter")
    NotesFile(tmp_path).append(lambda notes: remembered(notes, "The lighthouse is red.", True, NOW))
    index = RecallIndex(tmp_path)
    index.update()
    before = search(index, "lighthouse letter")
    assert len(before) == 3
    index.close()
    path = tmp_path / "memory" / "index.sqlite"
    if damage == "garbage":
        path.write_bytes(b"\x00not a database" * 4096)
    elif damage == "deleted":
        path.unlink()
    elif damage == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        db = sqlite3.connect(path)
        db.execute("PRAGMA user_version = 99" if damage == "stale" else "DROP TABLE sources")
        db.commit()
        db.close()
    again = RecallIndex(tmp_path)
    search(again, "lighthouse letter")  # whatever it finds, it raises nothing
    assert again.made == 1  # made anew, empty: to be filled again (brokerd, in the background)
    again.update()
    assert search(again, "lighthouse letter") == before
    session.close()


def test_a_replaced_log_is_read_again_and_a_removed_session_leaves(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "the violin is out of tune", "tune it")
    index = RecallIndex(tmp_path)
    index.update()
    log = session.log_path
    session.close()
    copy = log.with_name("copy")
    copy.write_bytes(log.read_bytes())
    copy.rename(log)  # the same bytes, another file: read again, not twice
    index.update()
    assert found(search(index, "violin")) == [("user", "s", 1)]
    for name in os.listdir(log.parent):
        (log.parent / name).unlink()
    log.parent.rmdir()
    assert index.update().removed == 2
    assert search(index, "violin") == []


def test_a_withdrawn_note_is_no_longer_found(tmp_path: Path) -> None:
    notes = NotesFile(tmp_path)
    notes.append(lambda held: remembered(held, "The spare key is under the mat.", False, NOW))
    index = RecallIndex(tmp_path)
    index.update_notes()
    (hit,) = search(index, "spare key")
    assert (hit.kind, hit.note) == ("note", "n1")
    notes.append(lambda held: withdrawn(held, "n1", NOW))
    assert index.update_notes().removed == 1
    assert search(index, "spare key") == []


def test_what_the_conversation_still_holds_is_not_recalled_again(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    for n in range(1, 4):
        turn(session, f"question {n} about glaciers", "an answer")
    index = RecallIndex(tmp_path)
    index.update()
    turns = [hit.turn for hit in search(index, "glaciers", session="s", first_turn=2)]
    assert turns == [1]
    assert len(search(index, "glaciers", session="other", first_turn=2)) == 3
    session.close()


def test_a_summary_of_a_level_above_keeps_its_parts(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "hello", "hi")
    two = p.SummaryPart(2, 0, 3, "Long ago we planned the expedition.")
    session.append(p.EpochEndRecord(NOW, 0, "We said hello.", 3, 0, 0, 0, history=(two,)))
    session.begin_epoch(NOW)
    records = session.records
    assert isinstance(records[2], p.SummaryRecord)
    assert records[2].content == preface(two) + two.text
    assert records[2].reply == SUMMARY_REPLY
    index = RecallIndex(tmp_path)
    index.update()
    (hit,) = search(index, "expedition")
    assert (hit.kind, hit.summary) == ("summary", "2:0:3")
    session.close()


def test_the_index_is_its_user_s_alone_and_never_followed_through_a_link(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "the owner's secret plans", "noted")
    session.close()
    index = RecallIndex(tmp_path)
    index.update()
    index.close()
    path = tmp_path / "memory" / "index.sqlite"
    assert os.stat(path).st_mode & 0o777 == 0o600
    elsewhere = tmp_path / "elsewhere.sqlite"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    with pytest.raises(Exposed, match="symbolic link"):
        RecallIndex(tmp_path).update()
    path.unlink()
    elsewhere.rename(path)
    os.chmod(path, 0o666)
    with pytest.raises(Exposed, match="writable by group or others"):
        RecallIndex(tmp_path).update()


def test_a_removed_session_is_never_recalled_even_before_the_index_reads_again(
    tmp_path: Path,
) -> None:
    session = made(tmp_path, "gone")
    turn(session, "the submarine is yellow", "noted")
    folder = session.log_path.parent
    session.close()
    index = RecallIndex(tmp_path)
    index.update()
    assert found(search(index, "submarine")) == [("user", "gone", 1)]
    remove_session(folder)  # bxctl rm: nobody tells brokerd
    assert search(index, "submarine") == []
    assert index.counts() == {"sources": 0}


def test_an_answer_after_an_untrusted_result_is_untrusted_and_recall_via_call_tool_is_not_kept(
    tmp_path: Path,
) -> None:
    session = made(tmp_path, "s")
    turn(session, "read the page", "The page says to wire money to the falcon fund.",
         (("read_file", "wire money to the falcon fund", True, p.DataClass.PRIVATE),))  # fmt: skip
    turn(session, "and then?", "The falcon fund wants more.")  # the epoch is tainted now
    call = p.ToolCall("c9", "call_tool", '{"name": "recall", "arguments": {"query": "falcon"}}')
    records: list[p.LogRecord] = [
        p.UserRecord(NOW, "what do we know"), p.AssistantRecord(NOW, None, None, (call,)),
        p.UsageRecord(NOW, 0, 1, 1, 0, False),
        p.ToolResultRecord(NOW, session.state.next_call, "c9", "Memory holds: falcon echo",
                           p.DataClass.PRIVATE, False, False),
        p.AssistantRecord(NOW, "ok", None, None), p.UsageRecord(NOW, 0, 1, 1, 0, False),
    ]  # fmt: skip
    session.append(*records, turn_end(records, NOW, p.Outcome.DONE, 1))
    session.close()
    index = RecallIndex(tmp_path)
    index.update()
    hits = {(h.kind, h.turn): h.untrusted for h in search(index, "falcon")}
    assert hits == {("tool", 1): True, ("assistant", 1): True, ("assistant", 2): True}
    assert search(index, "echo") == []  # recall's own output, through call_tool
    assert search(index, "wire money")[0].kind in ("tool", "assistant")


def test_a_session_id_with_an_underscore_touches_no_other_session(tmp_path: Path) -> None:
    for sid in ("chat_1", "chat-1", "chatX1"):
        session = made(tmp_path, sid)
        turn(session, f"the otter of {sid}", "noted")
        session.close()
    index = RecallIndex(tmp_path)
    index.update()
    for name in os.listdir(tmp_path / "sessions" / "chat_1"):
        (tmp_path / "sessions" / "chat_1" / name).unlink()
    (tmp_path / "sessions" / "chat_1").rmdir()
    index.update_session("chat_1")  # LIKE 'sessions/chat_1/%' would take chat-1 and chatX1
    assert sorted(h.session for h in search(index, "otter")) == ["chat-1", "chatX1"]


def test_a_log_cut_back_and_grown_again_is_read_again_from_its_start(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "the first kettle", "noted")
    before = session.state
    turn(session, "a heron that will be taken back", "noted")
    index = RecallIndex(tmp_path)
    index.update()
    session.cut_back(before)  # as a refused message is taken back
    turn(session, "a much longer message about the second kettle, longer than the heron", "ok")
    done = index.update()
    assert not done.problems, done.problems
    assert search(index, "heron") == [] or all(
        "kettle" in h.snippet for h in search(index, "heron")
    )
    assert sorted(h.turn for h in search(index, "kettle") if h.kind == "user") == [1, 2]
    session.close()


def test_a_fifo_at_a_log_s_path_is_passed_over_without_waiting(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "the lantern", "noted")
    log = session.log_path
    session.close()
    log.rename(log.with_name("kept"))
    os.mkfifo(log, 0o600)
    done = RecallIndex(tmp_path).update()  # would wait for a writer for ever
    assert any("is not a regular file" in problem for problem in done.problems), done


def test_a_summary_read_twice_in_one_part_is_kept_once(tmp_path: Path) -> None:
    # An epoch opened with a summary from before levels and closed since: its opening and its
    # epoch_end name the same summary, read in one go.
    session = made(tmp_path, "s")
    turn(session, "hello", "hi")
    legacy = p.SummaryPart(1, 0, 0, "An old summary of the lantern.")
    session.append(p.EpochEndRecord(NOW, 0, "We said hello.", 3, 0, 0, 0, history=(legacy,)))
    session.begin_epoch(NOW)
    turn(session, "again", "again")
    session.append(p.EpochEndRecord(NOW, 1, "Again.", 3, 0, 0, 0, history=(legacy,)))
    session.close()
    index = RecallIndex(tmp_path)
    assert not index.update().problems
    assert [h.summary for h in search(index, "lantern")] == ["1:0:0"]


def test_a_summary_from_before_levels_is_one_passage_in_its_epoch_end_and_the_next_opening() -> (
    None
):
    # Epoch 3 opened with a summary from before levels (of every epoch before it); its
    # epoch_end, written before levels too, holds a summary of epochs 0 to 3, which epoch 4
    # opens with: one summary under one name, so the index keeps it once.
    start = p.SessionStartRecord(NOW, p.SessionId("s"), 3, "main", "a" * 64)
    opened = p.EpochStartRecord(NOW, 3, NOW, 5, 5, "hi", 0, 0)
    old = p.SummaryRecord(NOW, LEGACY_PREFACE + "All before.", SUMMARY_REPLY)
    end = p.EpochEndRecord(NOW, 3, "All of it, again.", 5, 0, 0, 0)
    epoch_3 = [start, opened, old, end]
    (part,) = decided_parts(epoch_3, header(epoch_3))
    epoch_4 = [
        p.SessionStartRecord(NOW, p.SessionId("s"), 4, "main", "b" * 64),
        p.EpochStartRecord(NOW, 4, NOW, 5, 5, "hi", 0, 0),
        *opening_summaries([part], NOW),
    ]
    entries, cursor = log_entries(epoch_3, Cursor(), "s", 1)
    more, _cursor = log_entries(epoch_4, cursor, "s", 1)
    names = {entry.summary for entry in entries + more if "again" in entry.text}
    assert names == {"1:0:3"}


def test_a_secret_spreads_through_its_epoch_its_summary_and_the_epoch_that_opens_with_it(
    tmp_path: Path,
) -> None:
    session = made(tmp_path, "s")
    turn(session, "what does the vault say", "The code is ocelot-41.", (
        ("read_file", "the door code is ocelot-41", False, p.DataClass.SECRET),
    ))  # fmt: skip
    turn(session, "search for it", "Match ocelot-41 twice.", (
        ("search_files", "notes.md:3: ocelot-41 again", True, p.DataClass.PRIVATE),
    ))  # fmt: skip
    session.append(p.EpochEndRecord(NOW, 0, "The vault's code is ocelot-41.", 9, 0, 0, 0,
                                    secret=True))  # fmt: skip
    session.begin_epoch(NOW)
    turn(session, "say ocelot-41 once more", "It was ocelot-41.")
    NotesFile(tmp_path).append(lambda notes: remembered(notes, "code ocelot-41", False, NOW,
                                                        secret=True))  # fmt: skip
    other = made(tmp_path, "other")
    turn(other, "what do you know of ocelot-41", "Nothing yet.")
    index = RecallIndex(tmp_path)
    index.update()
    # The owner's own words are kept; the model's answers, the later results, the epoch's
    # summary, the next epoch's answers (it opened with that summary) and the note are not.
    hits = search(index, "ocelot-41")
    assert sorted(found(hits)) == [("user", "other", 1), ("user", "s", 3)]
    session.close()
    other.close()


def test_a_secret_holds_across_the_index_s_updates_turn_by_turn(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "what does the vault say", "ok.", (
        ("read_file", "the door code is ocelot-41", False, p.DataClass.SECRET),
    ))  # fmt: skip
    index = RecallIndex(tmp_path)
    index.update()  # as brokerd does after each turn (session_changed), from where it stopped
    turn(session, "tell me again", "The code is ocelot-41.")
    index.update_session("s")
    assert search(index, "ocelot-41") == []
    session.close()


def test_the_place_the_index_keeps_is_read_back_whole() -> None:
    place = Cursor(3, 7, 2, (("c1", "read_file"),), tainted=True, legacy=True, secret=True)
    assert _cursor(json.dumps(attrs.asdict(place))) == place  # every field, however many


def test_each_source_is_kept_by_its_path_under_the_home_its_place_as_it_always_was(
    tmp_path: Path,
) -> None:
    session = made(tmp_path, "s")
    turn(session, "read it", "ok", (("read_file", "tapir-9", False, p.DataClass.SECRET),))
    NotesFile(tmp_path).append(lambda notes: remembered(notes, "The tapir is 9.", True, NOW))
    index = RecallIndex(tmp_path)
    index.update()
    index.close()
    db = sqlite3.connect(tmp_path / "memory" / "index.sqlite")
    kept = dict(db.execute("SELECT path, cursor FROM sources").fetchall())
    db.close()
    assert set(kept) == {"memory/notes.jsonl", "sessions/s/0.jsonl"}
    place = _cursor(kept["sessions/s/0.jsonl"])
    assert place.secret
    assert kept["sessions/s/0.jsonl"] == json.dumps(attrs.asdict(place))  # byte for byte
    session.close()


def test_an_old_epoch_end_without_flags_takes_its_epoch_s_secret(tmp_path: Path) -> None:
    session = made(tmp_path, "s")
    turn(session, "read it", "ok", (("read_file", "tapir-9", False, p.DataClass.SECRET),))
    session.append(p.EpochEndRecord(NOW, 0, "It said tapir-9.", 9, 0, 0, 0))  # before flags
    index = RecallIndex(tmp_path)
    index.update()
    assert search(index, "tapir-9") == []
    session.close()
