"""When a schedule falls due: the forms of `when` (cron, at, in, every) read and refused, the
first due time after an instant and the latest at or before one, zones, and both days of
daylight saving (decisions.md, "Schedules and daylight saving")."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.schedules import (
    When,
    due_after,
    due_at_or_before,
    machine_zone,
    parse_when,
    zone_of,
)

NEW_YORK = ZoneInfo("America/New_York")
PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)


def read(text: str, zone: ZoneInfo = NEW_YORK, now: datetime = NOW) -> When:
    when = parse_when(text, zone, now)
    assert isinstance(when, When), when
    return when


def local(moment: datetime | None, zone: ZoneInfo = NEW_YORK) -> str:
    assert moment is not None
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


@pytest.mark.parametrize(
    ("text", "kind", "canonical"),
    [
        ("0 7 * * *", "cron", "cron 0 7 * * *"),
        ("cron  */15 9-17 * * mon-fri", "cron", "cron */15 9-17 * * mon-fri"),
        ("every 20 minutes", "every", "every 20m"),
        ("every 1h30m", "every", "every 1h30m"),
        ("EVERY 90s", "every", "every 1m30s"),
        ("every 1 day", "every", "every 1d"),
        ("in 20m", "at", "at 2026-03-07T12:20:00+00:00"),
        ("at 2026-12-07T09:00", "at", "at 2026-12-07T14:00:00+00:00"),  # New York's 09:00
        ("at 2026-12-07T09:00+01:00", "at", "at 2026-12-07T08:00:00+00:00"),
    ],
)
def test_each_form_is_read_and_written_one_way(text: str, kind: str, canonical: str) -> None:
    when = read(text)
    assert (when.kind, when.text) == (kind, canonical)
    assert read(when.text, now=NOW) == when  # the canonical form reads as itself


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("every 0 minutes", "an interval is from 1 second to 366 days"),
        ("every 400 days", "an interval is from 1 second to 366 days"),
        ("every soon", "is not a duration"),
        ("every 5 fortnights", "is not a duration"),
        ("in 0s", "from 1 second to 366 days"),
        ("at 2026-03-07T06:59", "that time is past"),
        ("at tomorrow", "not an ISO time"),
        ("0 0 30 2 *", "never falls due"),  # the 30th of February
        ("* * * * * *", "five fields"),  # croniter would take seconds: not here
        ("@daily", "is not a when"),
        ("60 * * * *", "not a cron expression"),
        ("", "1 to 200 characters"),
        ("R R * * *", "is not a when"),  # croniter's random: another time each look
        ("0 H * * *", "is not a when"),  # croniter's hashed
        ("every 999999999d999999999d", "an interval is from 1 second to 366 days"),
        ("in 999999999d", "an interval is from 1 second to 366 days"),
        ("at 0001-01-01T00:00+14:00", "out of range"),
        ("at 9999-12-31T23:59:59-12:00", "out of range"),
        ("at 2200-01-01T00:00Z", "more than 100 years from now"),
        ("every " + "1s" * 150, "1 to 200 characters"),
    ],
)
def test_a_wrong_when_is_said_in_words(text: str, said: str) -> None:
    answer = parse_when(text, NEW_YORK, NOW)
    assert isinstance(answer, str)
    assert said in answer


def test_zones_are_iana_names_and_nothing_else() -> None:
    assert zone_of("Europe/Paris") == PARIS
    for bad in ("../../etc/passwd", "/etc/localtime", "Mars/Olympus", "x" * 100, "Europe/../UTC"):
        assert isinstance(zone_of(bad), str)


def test_the_machines_zone_comes_from_tz_then_localtime(tmp_path: Path) -> None:
    assert machine_zone(tmp_path / "none", "Europe/Paris") == "Europe/Paris"
    assert machine_zone(tmp_path / "none", "Nowhere/Else") == "UTC"
    zoneinfo = tmp_path / "usr" / "share" / "zoneinfo" / "Asia"
    zoneinfo.mkdir(parents=True)
    (zoneinfo / "Tokyo").write_bytes(b"")
    (tmp_path / "localtime").symlink_to(zoneinfo / "Tokyo")
    assert machine_zone(tmp_path / "localtime", None) == "Asia/Tokyo"


def test_a_daily_cron_falls_due_in_its_zone() -> None:
    when = read("0 7 * * *", PARIS)
    due = due_after(when, PARIS, NOW, NOW)
    assert local(due, PARIS) == "2026-03-08 07:00:00 CET"
    assert local(due_after(when, PARIS, NOW, due), PARIS) == "2026-03-09 07:00:00 CET"  # type: ignore[arg-type]


def test_spring_forward_a_time_that_does_not_exist_falls_due_when_the_gap_ends() -> None:
    # New York, 2026-03-08: 02:00 EST becomes 03:00 EDT. 02:30 is not a time that day.
    when = read("30 2 * * *")
    due = due_after(when, NEW_YORK, NOW, NOW)
    assert local(due) == "2026-03-08 03:00:00 EDT"
    assert local(due_after(when, NEW_YORK, NOW, due)) == "2026-03-09 02:30:00 EDT"  # type: ignore[arg-type]
    # Caught up after the gap, it is the same one time.
    later = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)
    assert due_at_or_before(when, NEW_YORK, NOW, later) == due


def test_fall_back_a_time_that_happens_twice_falls_due_once_the_first_time() -> None:
    # New York, 2026-11-01: 02:00 EDT becomes 01:00 EST. 01:30 happens twice that day.
    made = datetime(2026, 10, 31, 12, 0, tzinfo=UTC)
    when = read("30 1 * * *", now=made)
    due = due_after(when, NEW_YORK, made, made)
    assert local(due) == "2026-11-01 01:30:00 EDT"
    assert local(due_after(when, NEW_YORK, made, due)) == "2026-11-02 01:30:00 EST"  # type: ignore[arg-type]
    # In the repeated hour, after the first 01:30: the second is not another due time.
    second_pass = datetime(2026, 11, 1, 6, 10, tzinfo=UTC)  # 01:10 EST
    assert local(due_after(when, NEW_YORK, made, second_pass)) == "2026-11-02 01:30:00 EST"
    # An hourly job in the repeated hour runs once for each wall-clock time.
    hourly = read("30 * * * *", now=made)
    after_first = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    assert local(due_after(hourly, NEW_YORK, made, after_first)) == "2026-11-01 02:30:00 EST"


def test_every_counts_elapsed_time_across_a_change_of_the_clocks() -> None:
    made = datetime(2026, 3, 8, 5, 0, tzinfo=UTC)  # 00:00 EST, the day of the gap
    when = read("every 1h", now=made)
    dues = [made]
    for _ in range(4):
        dues.append(due_after(when, NEW_YORK, made, dues[-1]))  # type: ignore[arg-type]
    assert [b - a for a, b in itertools.pairwise(dues)] == [timedelta(hours=1)] * 4
    assert [local(d)[11:16] for d in dues[1:]] == ["01:00", "03:00", "04:00", "05:00"]


def test_an_at_falls_due_once() -> None:
    when = read("at 2026-03-07T12:20Z")
    assert due_after(when, NEW_YORK, NOW, NOW) == datetime(2026, 3, 7, 12, 20, tzinfo=UTC)
    assert due_after(when, NEW_YORK, NOW, datetime(2026, 3, 7, 12, 20, tzinfo=UTC)) is None
    assert due_at_or_before(when, NEW_YORK, NOW, NOW) is None


@given(
    seconds=st.integers(1, 7 * 86400),
    offset=st.integers(0, 30 * 86400),
    micro=st.integers(0, 999_999),
)
def test_every_due_time_is_on_its_grid_and_the_next_follows_the_latest(
    seconds: int, offset: int, micro: int
) -> None:
    made = NOW + timedelta(microseconds=micro)
    when = read(f"every {seconds}s", now=made)
    moment = made + timedelta(seconds=offset, microseconds=micro)
    after = due_after(when, NEW_YORK, made, moment)
    latest = due_at_or_before(when, NEW_YORK, made, moment)
    assert after is not None
    assert after > moment
    assert (after - made) % timedelta(seconds=seconds) == timedelta(0)
    if latest is None:
        assert after == made + timedelta(seconds=seconds)
    else:
        assert latest <= moment < after
        assert after - latest == timedelta(seconds=seconds)


@given(
    minutes=st.integers(0, 60 * 24 * 400),
    expression=st.sampled_from(["0 7 * * *", "30 2 * * *", "30 1 * * *", "*/20 * * * *"]),
    zone=st.sampled_from([NEW_YORK, PARIS, ZoneInfo("Australia/Lord_Howe"), ZoneInfo("UTC")]),
)
def test_a_cron_next_and_latest_bracket_any_instant(
    minutes: int, expression: str, zone: ZoneInfo
) -> None:
    made = datetime(2026, 1, 1, tzinfo=UTC)
    when = read(expression, zone, made)
    moment = made + timedelta(minutes=minutes, seconds=17)
    after = due_after(when, zone, made, moment)
    latest = due_at_or_before(when, zone, made, moment)
    assert after is not None
    assert after > moment
    if latest is None:  # nothing fell due since it was made
        assert due_after(when, zone, made, made) == after
        return
    assert made < latest <= moment
    assert due_after(when, zone, made, latest) == after  # nothing falls due between them


def test_a_minute_cron_made_in_the_repeated_hour_still_falls_due() -> None:
    # Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET; a pause resumed at the second 02:10.
    second_pass = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10 CET
    when = read("*/5 * * * *", PARIS, second_pass)
    due = due_after(when, PARIS, second_pass, second_pass)
    assert local(due, PARIS) == "2026-10-25 03:00:00 CET"  # the repeated hour is not run again


def test_far_times_are_none_never_an_error() -> None:
    end = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    every = When("every", "every 366d", every=timedelta(days=366))
    assert due_after(every, NEW_YORK, end, end) is None
    assert due_at_or_before(every, NEW_YORK, datetime(1, 1, 2, tzinfo=UTC), end) is not None
    cron = read("0 7 * * *")
    assert due_after(cron, ZoneInfo("Pacific/Kiritimati"), end, end) is None
