"""The scheduler's timing, pure: the wall clock (`now`) and trio's clock (`tick`) driven apart.
Catch-up both ways, a leap of the wall clock each way, the no-overlap rule, the bound per
session and per hour, pauses and resumes, and the line a scheduled message opens with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from boxmaker import proto as p
from boxmaker.config import SchedulesConfig
from boxmaker.schedules import (
    Book,
    Fire,
    Held,
    Plan,
    Wanted,
    firing_due,
    firing_session,
    header,
    made,
    next_shown,
)

MADE = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)
S1 = p.SessionId("chat-1")
S2 = p.SessionId("chat-2")
DAY = timedelta(days=1)


class Rig:
    """A plan and its file, with a wall clock and a tick each moved by hand."""

    def __init__(self, bounds: SchedulesConfig | None = None) -> None:
        self.plan = Plan(bounds or SchedulesConfig())
        self.now, self.tick = MADE, 0.0

    def add(
        self,
        when: str,
        session: p.SessionId | None = S1,
        catch_up: p.CatchUp = p.CatchUp.ONCE,
        at: datetime | None = None,
        **extra: object,
    ) -> str:
        wanted = Wanted(
            when,
            "UTC",
            f"message {len(self.plan.book.entries) + 1}",
            p.CreatedBy.OWNER,
            session,
            "identity" if session else "",
            new_session=session is None,
            catch_up=catch_up,
            **extra,  # type: ignore[arg-type]
        )
        record = made(self.plan.book, wanted, p.Timestamp(at or self.now), SchedulesConfig())
        assert isinstance(record, p.ScheduleRecord), record
        self.plan.take([record])
        return record.id

    def step(self, seconds: float, wall: timedelta | None = None) -> None:
        """`seconds` pass on trio's clock; the wall clock moves as much, or by `wall`."""
        self.tick += seconds
        self.now += timedelta(seconds=seconds) if wall is None else wall

    def due(self) -> list[Fire | Held]:
        return self.plan.due(self.now, self.tick)

    def end(self, fire: Fire, outcome: p.Fired = p.Fired.RAN) -> list[p.FiredRecord]:
        """The firing's turn ended: its records are appended, and read back."""
        records = self.plan.ended(
            p.FiredRecord(p.Timestamp(self.now), fire.id, p.Timestamp(fire.due), outcome)
        )
        self.plan.take(list(records))
        return records


def fires(actions: list[Fire | Held]) -> list[tuple[str, datetime]]:
    assert all(isinstance(a, Fire) for a in actions), actions
    return [(a.id, a.due) for a in actions if isinstance(a, Fire)]


def test_every_fires_each_due_time_and_wakes_for_the_next() -> None:
    rig = Rig()
    s1 = rig.add("every 10s")
    assert rig.due() == []
    assert rig.plan.wake(rig.now, rig.tick) == 10.0
    rig.step(10)
    (fire,) = rig.due()
    assert isinstance(fire, Fire)
    assert (fire.id, fire.due, fire.session) == (s1, MADE + timedelta(seconds=10), S1)
    assert fire.content.endswith("\n\nmessage 1")
    rig.end(fire)
    assert rig.due() == []
    assert rig.plan.wake(rig.now, rig.tick) == 10.0


def test_a_turn_still_running_makes_the_next_due_time_an_overlap_kept_once() -> None:
    rig = Rig()
    rig.add("every 10s")
    rig.step(10)
    (fire,) = rig.due()
    assert isinstance(fire, Fire)
    for _ in range(3):  # three more due times while the first turn runs
        rig.step(10)
        assert rig.due() == []
    records = rig.end(fire)
    assert [(r.due.value, r.outcome) for r in records] == [
        (MADE + timedelta(seconds=10), p.Fired.RAN),
        (MADE + timedelta(seconds=40), p.Fired.OVERLAP),  # one, of the latest: no pile-up
    ]
    rig.step(10)
    assert fires(rig.due()) == [("s1", MADE + timedelta(seconds=50))]


def test_after_loopd_was_down_what_fell_due_fires_once_with_catch_up_once() -> None:
    rig = Rig()
    rig.add("every 1h")
    rig.add("0 9 * * *", session=S2)
    rig.step(3 * 86400 + 1800)  # down three days and a half hour
    actions = rig.plan.start(rig.now, rig.tick)
    assert fires(actions) == [
        ("s1", MADE + timedelta(hours=72)),  # the latest of 72 due times, once
        ("s2", MADE.replace(hour=9) + 2 * DAY),
    ]
    assert rig.due() == []


def test_after_loopd_was_down_nothing_fires_with_catch_up_skip_and_the_next_does() -> None:
    rig = Rig()
    rig.add("every 1h", catch_up=p.CatchUp.SKIP)
    rig.step(5 * 3600 + 60)
    assert rig.plan.start(rig.now, rig.tick) == []
    assert rig.due() == []
    assert rig.plan.wake(rig.now, rig.tick) == 3600 - 60
    rig.step(3600 - 60)
    assert fires(rig.due()) == [("s1", MADE + timedelta(hours=6))]


def test_a_leap_of_the_wall_clock_forward_fires_once_not_once_per_day() -> None:
    rig = Rig()
    rig.add("0 7 * * *")
    rig.step(1, wall=5 * DAY)  # the machine slept five days
    assert fires(rig.due()) == [("s1", MADE.replace(hour=7) + 4 * DAY)]


def test_a_leap_of_the_wall_clock_back_neither_fires_again_nor_skips_the_day() -> None:
    rig = Rig()
    rig.add("0 7 * * *")
    rig.step(3600)
    (fire,) = rig.due()
    assert isinstance(fire, Fire)
    rig.end(fire)
    rig.step(60, wall=-DAY)  # NTP takes the clock back a day: 07:00 the day before
    assert rig.due() == []
    rig.step(86400 + 60)  # back where it was, and on
    assert rig.now == MADE.replace(hour=7, minute=1)
    assert rig.due() == []
    rig.step(1, wall=DAY - timedelta(minutes=1))  # the next day's 07:00
    assert fires(rig.due()) == [("s1", MADE.replace(hour=7) + DAY)]


def test_at_most_one_scheduled_turn_starts_a_second_in_a_session() -> None:
    rig = Rig()
    rig.add("every 10s")
    rig.add("every 10s")
    rig.add("every 10s", session=S2)
    rig.step(10)
    assert [a.id for a in rig.due() if isinstance(a, Fire)] == ["s1", "s3"]
    assert rig.plan.wake(rig.now, rig.tick) == 1.0
    rig.step(0.5)
    assert rig.due() == []
    rig.step(0.5)
    assert fires(rig.due()) == [("s2", MADE + timedelta(seconds=10))]


def test_past_the_hourly_bound_a_schedule_is_paused_and_says_why() -> None:
    rig = Rig(SchedulesConfig(max_scheduled_turns_per_hour=2))
    for _ in range(3):
        rig.add("every 10m", session=None)
    rig.step(600)
    actions = rig.due()
    assert [type(a) for a in actions] == [Fire, Fire, Held]
    held = actions[2]
    assert isinstance(held, Held)
    assert held.pause is not None
    assert held.fired.outcome is p.Fired.PAUSED
    assert "max_scheduled_turns_per_hour" in held.pause.why
    rig.plan.take([held.fired, held.pause])
    for fire in actions[:2]:
        assert isinstance(fire, Fire)
        rig.end(fire)
    rig.step(3600)  # an hour on, the two run again; the paused one does not
    assert [a.id for a in rig.due() if isinstance(a, Fire)] == ["s1", "s2"]


def test_a_paused_schedule_does_not_fire_and_resumed_fires_from_its_next_time() -> None:
    rig = Rig()
    rig.add("every 10m")
    rig.plan.take([p.PauseRecord(p.Timestamp(rig.now), "s1")])
    rig.step(3600)
    assert rig.due() == []
    assert rig.plan.wake(rig.now, rig.tick) is None
    rig.plan.take([p.ResumeRecord(p.Timestamp(rig.now), "s1")])
    assert rig.due() == []  # the hour it was paused is not caught up
    rig.step(600)
    assert fires(rig.due()) == [("s1", MADE + timedelta(minutes=70))]


def test_an_at_fires_once_and_is_then_no_longer_live() -> None:
    rig = Rig()
    rig.add("in 5m", session=None)
    rig.step(300)
    (fire,) = rig.due()
    assert isinstance(fire, Fire)
    assert fire.new_session
    assert fire.session == firing_session("s1", fire.due)
    assert str(fire.session) == "s1-20261206T060500Z"
    rig.end(fire)
    assert rig.plan.book.live() == []
    rig.step(DAY.total_seconds())
    assert rig.due() == []


def test_the_line_before_the_message_says_who_when_and_how_late() -> None:
    book = Book()
    wanted = Wanted(
        "0 7 * * *", "Europe/Paris", "tell me the news", p.CreatedBy.OWNER, S1, "identity"
    )
    record = made(book, wanted, p.Timestamp(MADE), SchedulesConfig())
    assert isinstance(record, p.ScheduleRecord)
    book.take(record)
    due = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
    assert header(book.entries["s1"], due, due + timedelta(seconds=2)) == (
        "[A scheduled message (s1, cron 0 7 * * *), set by the owner. Due 2026-12-07 "
        "07:00:00 Europe/Paris; it starts 2 s late.]"
    )
    agent = Wanted(
        "every 1h", "UTC", "look again", p.CreatedBy.AGENT, S1, "identity", turn=4, tainted=True
    )
    record = made(book, agent, p.Timestamp(MADE), SchedulesConfig())
    assert isinstance(record, p.ScheduleRecord)
    book.take(record)
    said = header(book.entries["s2"], due, due + timedelta(hours=3))
    assert "set by you, the agent, in turn 4: the words below are your own" in said
    assert "untrusted result" in said
    assert "3 h late" in said


def test_making_a_schedule_is_bounded() -> None:
    book = Book()
    bounds = SchedulesConfig(max_schedules=1, max_message_chars=10)
    now = p.Timestamp(MADE)

    def wanted(message: str = "hi", tz: str = "UTC", session: p.SessionId | None = S1) -> Wanted:
        return Wanted("every 1h", tz, message, p.CreatedBy.OWNER, session, "i")

    assert "max_message_chars" in str(made(book, wanted("x" * 11), now, bounds))
    assert "is empty" in str(made(book, wanted("  "), now, bounds))
    assert "time zone" in str(made(book, wanted(tz="Mars/Base"), now, bounds))
    assert "one session" in str(made(book, wanted(session=None), now, bounds))
    record = made(book, wanted(), now, bounds)
    assert isinstance(record, p.ScheduleRecord)
    book.take(record)
    assert "max_schedules" in str(made(book, wanted(), now, bounds))
    book.take(p.CancelRecord(now, "s1"))
    assert isinstance(made(book, wanted(), now, bounds), p.ScheduleRecord)


def test_a_wall_clock_wrong_by_years_and_set_right_does_not_silence_a_schedule() -> None:
    rig = Rig()
    rig.add("0 7 * * *")
    rig.step(1, wall=5 * 365 * DAY)  # the machine woke in the wrong year
    (fire,) = rig.due()
    assert isinstance(fire, Fire)
    rig.end(fire)  # its `fired` is in the file: a due time five years on
    rig.step(1, wall=-5 * 365 * DAY)  # put right, and seen at the next pass (a second on)
    assert rig.due() == []
    dues = []
    for _ in range(3 * 24):
        rig.step(3600)
        for action in rig.due():
            assert isinstance(action, Fire)
            dues.append(action.due)
            rig.end(action)
    assert dues == [MADE.replace(hour=7) + n * DAY for n in range(3)]
    entry = rig.plan.book.entries["s1"]
    assert next_shown(entry, rig.now) == f"{MADE.replace(hour=7) + 3 * DAY:%Y-%m-%d %H:%M:%S}"


def test_a_firings_session_names_its_due_time() -> None:
    for due in (MADE, MADE.replace(microsecond=123456)):
        assert firing_due("s4", str(firing_session("s4", due))) == due
    for name in ("s4", "s41-20261206T060000Z", "s4-20261206T060000", "s4-2026Z", "chat-1"):
        assert firing_due("s4", name) is None


def test_an_at_passed_over_no_longer_counts_against_the_bound() -> None:
    book = Book()
    bounds = SchedulesConfig(max_schedules=1)
    once = Wanted("in 1m", "UTC", "x", p.CreatedBy.OWNER, S1, "i", catch_up=p.CatchUp.SKIP)
    record = made(book, once, p.Timestamp(MADE), bounds)
    assert isinstance(record, p.ScheduleRecord)
    book.take(record)
    again = Wanted("in 1h", "UTC", "y", p.CreatedBy.OWNER, S1, "i")
    assert "max_schedules" in str(made(book, again, p.Timestamp(MADE), bounds))
    later = p.Timestamp(MADE + timedelta(minutes=2))  # its minute passed while loopd was down
    assert book.entries["s1"].finished(later.value)
    assert isinstance(made(book, again, later, bounds), p.ScheduleRecord)
