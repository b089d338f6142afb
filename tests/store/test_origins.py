"""The origin index beside a session's logs (`store.OriginIndex`): read forward from its mark,
never trusted past what the log says: built again when missing, damaged, of another folder,
or when its mark's line is gone (a log cut back); a place read back from the log, and a stale
one forgotten."""

from __future__ import annotations

import shutil
from pathlib import Path

from boxmaker import proto as p
from boxmaker.clock import TickingClock
from boxmaker.layout import ORIGINS
from boxmaker.session import Place, Recorded, turn_end
from boxmaker.store import FileSystem, OriginIndex, Store
from boxmaker.store.open_session import OpenSession

S = p.SessionId("s")
A, B = p.Origin("matrix", "$a"), p.Origin("schedule", "b@07:00")


def session(home: Path) -> tuple[Store, OpenSession]:
    clock = TickingClock()
    store = Store(home, clock)
    baseline = p.Baseline(system="You are a test.", tools=())
    return store, store.create(S, baseline, "main")


def one_turn(session: OpenSession, content: str, origin: p.Origin | None, answer: str) -> None:
    now = session.records[0].time
    user = p.UserRecord(now, content, origin)
    said = p.AssistantRecord(now, answer, None, None)
    usage = p.UsageRecord(now, 1, 2, 3, 0, False)
    records: list[p.LogRecord] = [user, said, usage]
    session.append(*records, turn_end(records, now, p.Outcome.DONE, 5))


def test_origins_are_found_read_back_and_kept_in_the_index(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    one_turn(opened, "One.", A, "First.")
    one_turn(opened, "Two.", None, "Second.")
    index = OriginIndex(FileSystem(), store.folder(S))
    index.refresh()
    place = index.find(A)
    assert place is not None
    assert index.recorded(A, place) == Recorded("done", "First.")
    assert index.find(B) is None
    one_turn(opened, "Three.", B, "Third.")
    index.refresh()  # read on from the mark: only the new lines
    found = index.find(B)
    assert found is not None
    assert index.recorded(B, found) == Recorded("done", "Third.")
    lines = (store.folder(S) / ORIGINS).read_text().splitlines()
    assert len([line for line in lines if '"id"' in line]) == 2
    again = OriginIndex(FileSystem(), store.folder(S))  # another loopd: the file is read
    again.refresh()
    assert again.find(A) == place


def test_a_running_turn_s_origin_is_running(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    opened.append(p.UserRecord(opened.records[0].time, "Go.", A))
    index = OriginIndex(FileSystem(), store.folder(S))
    index.refresh()
    place = index.find(A)
    assert place is not None
    assert index.recorded(A, place) == Recorded("running")


def test_a_missing_or_damaged_index_is_built_again_from_the_log(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    one_turn(opened, "One.", A, "First.")
    index = OriginIndex(FileSystem(), store.folder(S))
    index.refresh()
    path = store.folder(S) / ORIGINS
    for damage in (b"", b"not json\n", b'{"channel":"x"}\n', b'{"epoch":0,"from":1'):
        path.write_bytes(damage)
        fresh = OriginIndex(FileSystem(), store.folder(S))
        fresh.refresh()
        assert fresh.find(A) is not None, damage
        assert b"not json" not in path.read_bytes()


def test_a_mark_whose_line_is_gone_builds_the_index_again(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    before = opened.state
    one_turn(opened, "One.", A, "First.")
    index = OriginIndex(FileSystem(), store.folder(S))
    index.refresh()
    assert index.find(A) is not None
    opened.cut_back(before)  # the turn is taken back out of the log
    one_turn(opened, "Other.", B, "Second.")  # and another written where it was
    index.refresh()
    assert index.find(A) is None
    place = index.find(B)
    assert place is not None
    assert index.recorded(B, place) == Recorded("done", "Second.")


def test_a_stale_place_is_forgotten_not_believed(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    one_turn(opened, "One.", A, "First.")
    index = OriginIndex(FileSystem(), store.folder(S))
    index.refresh()
    assert index.recorded(A, Place(0, 3)) is None  # not where a line starts
    assert index.recorded(A, Place(0, 0)) is None  # a line, but not A's user record
    assert index.find(A) is None


def test_a_session_made_again_under_the_id_starts_a_new_index(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    one_turn(opened, "One.", A, "First.")
    index = OriginIndex(FileSystem(), store.folder(S))
    index.refresh()
    opened.close()
    FileSystem().remove_tree(store.folder(S))
    _store, remade = session(tmp_path)
    one_turn(remade, "Two.", B, "Second.")
    index.refresh()
    assert index.find(A) is None
    assert index.find(B) is not None


def test_an_index_with_offsets_past_its_log_is_built_again_not_believed(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    one_turn(opened, "One.", A, "First.")
    path = store.folder(S) / ORIGINS
    for planted in (
        b'{"epoch":0,"from":9223372036854775807,"hash":"' + b"a" * 64 + b'"}\n',
        b'{"epoch":0,"from":4611686018427387904,"hash":"' + b"a" * 64 + b'"}\n',
        b'{"epoch":0,"from":999999,"hash":"' + b"a" * 64 + b'"}\n',
        b'{"channel":"matrix","id":"$a","epoch":0,"at":99999999}\n',
    ):
        path.write_bytes(planted)
        index = OriginIndex(FileSystem(), store.folder(S))
        index.refresh()
        place = index.find(A)
        assert place is not None, planted
        assert index.recorded(A, place) == Recorded("done", "First."), planted


def test_a_session_folder_that_is_a_link_has_no_origins(tmp_path: Path) -> None:
    store, opened = session(tmp_path)
    one_turn(opened, "One.", A, "First.")
    outside = tmp_path / "elsewhere"
    FileSystem().remove_tree(outside)
    shutil.copytree(store.folder(S), outside)
    link = store.folder(S).with_name("s2")
    link.symlink_to(outside)
    index = OriginIndex(FileSystem(), link)
    index.refresh()
    assert index.find(A) is None  # never read through the link: the store refuses it
