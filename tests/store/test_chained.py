"""A chained file appended to by a reader that keeps its place (`append_known`, loopd's
`fired`): only what was written since is read, the chain goes on whole, a write cut short is set
aside, and another file at the path (cut back, replaced) is read whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.layout import torn_name
from boxmaker.schedules import SchedulesDamaged, schedules_file

NOW = p.Timestamp.parse("2026-12-06T10:00:00.000000Z")


def fired(n: int) -> p.FiredRecord:
    return p.FiredRecord(NOW, f"s{n}", NOW, p.Fired.RAN)


def test_an_append_reads_only_what_was_written_since(tmp_path: Path) -> None:
    file = schedules_file(tmp_path)
    for n in range(1, 4):
        file.append(lambda _held, n=n: fired(n))
    _, link, end = file.read_from(0, None)  # a reader's place
    file.append(lambda _held: fired(4))  # another writer, since
    file.append_known(fired(5), end, link)
    assert [r.id for r in file.read()] == ["s1", "s2", "s3", "s4", "s5"]
    # Line 1 spoilt: a reader that keeps its place past it does not read it again (and
    # `append`, which reads the whole file, refuses it).
    data = file.path.read_bytes()
    file.path.write_bytes(data.replace(b'"s1"', b'"s9"', 1))
    _, link, end = file.read_from(end, link)
    file.append_known(fired(6), end, link)
    with pytest.raises(SchedulesDamaged, match="line 1"):
        file.append(lambda _held: fired(7))
    assert file.path.read_bytes().count(b"\n") == 6


def test_a_write_cut_short_is_set_aside_and_another_file_is_read_whole(tmp_path: Path) -> None:
    file = schedules_file(tmp_path)
    file.append(lambda _held: fired(1))
    _, link, end = file.read_from(0, None)
    with file.path.open("ab") as out:
        out.write(b'{"type":"fired"')
    file.append_known(fired(2), end, link)
    assert [r.id for r in file.read()] == ["s1", "s2"]
    assert file.path.with_name(torn_name(file.path.name, end)).read_bytes() == b'{"type":"fired"'
    # Cut back under the reader's place, then a longer file of another chain: read whole.
    _, link, end = file.read_from(0, None)
    file.path.unlink()
    file.append(lambda _held: fired(3))
    file.append_known(fired(4), end, link)
    for n in range(5, 9):
        file.append(lambda _held, n=n: fired(n))
    file.append_known(fired(9), end, link)
    assert [r.id for r in file.read()] == [f"s{n}" for n in range(3, 10)]
