"""When a schedule falls due (SPEC section 19): its `when` read and written in one canonical
form, and the first due time after a given instant. Pure: every time is an aware `datetime`,
and "now" is always an argument.

The forms:

    cron M H DoM Mon DoW      five cron fields (`croniter` reads them), in the schedule's zone
    at 2026-12-07T09:00       once; a time without an offset is read in the schedule's zone
    in 20m                    once, that long from when it is made (written as `at ...`)
    every 90s | 20m | 2h | 1d an interval (units may be combined: 1h30m), counted from when the
                              schedule was made, in elapsed time (a zone's change moves none)

A cron time follows the zone's rules. On the day clocks go forward, a time that does not exist
(02:30 where 02:00 becomes 03:00) falls due at the first moment after the gap (03:00). On the
day they go back, a time that happens twice (01:30) falls due once, the first time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from attrs import frozen

__all__ = [
    "MAX_WHEN",
    "MIN_EVERY",
    "When",
    "due_after",
    "due_at_or_before",
    "machine_zone",
    "parse_when",
    "zone_of",
]

MAX_WHEN = 200  # characters of a `when`
MIN_EVERY = timedelta(seconds=1)
MAX_EVERY = timedelta(days=366)
MAX_AHEAD = timedelta(days=36525)  # an `at` at most a hundred years on
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WORDS = {
    "second": "s",
    "seconds": "s",
    "sec": "s",
    "secs": "s",
    "minute": "m",
    "minutes": "m",
    "min": "m",
    "mins": "m",
    "hour": "h",
    "hours": "h",
    "day": "d",
    "days": "d",
}
_PART = re.compile(r"(\d{1,9})\s*([a-z]+)", re.ASCII)
_ZONE = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+){0,3}", re.ASCII)
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,\-?#]{1,40}", re.ASCII)
# The letters a field may hold: month and day names, `L`, `W` (not croniter's `R`, random,
# nor `H`, hashed: a due time must be the same each time it is computed).
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CRON_WORDS = frozenset((*_MONTHS, "sun", "mon", "tue", "wed", "thu", "fri", "sat", "l", "w"))
_LETTERS = re.compile(r"[A-Za-z]+", re.ASCII)
_LOOKS = 128  # cron candidates weighed for one due time: a repeated hour skips up to 60


@frozen
class When:
    """A `when` read: its kind (`cron`, `at`, `every`), its canonical text, and its value."""

    kind: str
    text: str
    cron: str = ""
    at: datetime | None = None
    every: timedelta | None = None


def zone_of(name: str) -> ZoneInfo | str:
    """The IANA zone `name`, or why it is none."""
    if len(name) > 64 or not _ZONE.fullmatch(name) or ".." in name:
        return f"{name[:64]!r} is not an IANA time zone name (such as Europe/Paris or UTC)"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return f"{name!r} is not a time zone this machine knows (such as Europe/Paris or UTC)"


def machine_zone(localtime: Path = Path("/etc/localtime"), tz: str | None = None) -> str:
    """The machine's zone's name: `$TZ` when it names one, else where `/etc/localtime` links
    into a zoneinfo folder, else UTC."""
    if tz and isinstance(zone_of(tz.removeprefix(":")), ZoneInfo):
        return tz.removeprefix(":")
    try:
        target = str(localtime.resolve())
    except OSError:
        return "UTC"
    _, found, name = target.partition("/zoneinfo/")
    return name if found and isinstance(zone_of(name), ZoneInfo) else "UTC"


def parse_when(text: str, zone: ZoneInfo, now: datetime) -> When | str:
    """`text` as a `When` (an `in` made an `at` from `now`), or what is wrong with it: a form
    not known, an interval of nothing, a time past or out of range, a cron that never falls
    due. Never raises."""
    try:
        return _parse(text, zone, now)
    except (OverflowError, ValueError) as error:  # a time past what a datetime holds
        return f"{text[:MAX_WHEN]!r} is out of range: {error}"


def _parse(text: str, zone: ZoneInfo, now: datetime) -> When | str:
    said = " ".join(text.split())
    if not said or len(said) > MAX_WHEN:
        return f"a when is 1 to {MAX_WHEN} characters: cron M H DoM Mon DoW, at TIME, in or every"
    head, _, rest = said.partition(" ")
    head = head.lower()
    if head in ("every", "in"):
        interval = _duration(rest)
        if isinstance(interval, str):
            return f"{head} {interval}"
        if head == "in":
            return _at(now + interval, now)
        return When("every", f"every {_compact(interval)}", every=interval)
    if head == "at":
        try:
            moment = datetime.fromisoformat(rest)
        except ValueError:
            such = "2026-12-07T09:00 or 2026-12-07T09:00+01:00"
            return f"at {rest!r}: not an ISO time such as {such}"
        if moment.tzinfo is None:
            moment = _wall_to_utc(moment, zone)
        return _at(moment, now)
    fields = said.split(" ")[1:] if head == "cron" else said.split(" ")
    return _cron(fields, zone, now)


def _at(moment: datetime, now: datetime) -> When | str:
    moment = moment.astimezone(UTC)
    if moment <= now:
        return f"at {moment.isoformat()}: that time is past (it is {now.isoformat()} now)"
    if moment - now > MAX_AHEAD:
        return f"at {moment.isoformat()}: more than 100 years from now"
    return When("at", f"at {moment.isoformat()}", at=moment)


def _cron(fields: list[str], zone: ZoneInfo, now: datetime) -> When | str:
    expression = " ".join(fields)
    words = {word.lower() for word in _LETTERS.findall(expression)}
    if len(fields) != 5 or not all(_CRON_FIELD.fullmatch(f) for f in fields) or words - _CRON_WORDS:
        return (
            f"{expression!r} is not a when: cron M H DoM Mon DoW (five fields), at TIME, "
            "in DURATION or every DURATION"
        )
    from croniter import croniter  # only a cron needs it

    if not croniter.is_valid(expression):
        return f"cron {expression}: not a cron expression croniter reads"
    when = When("cron", f"cron {expression}", cron=expression)
    if due_after(when, zone, now, now) is None:
        return f"cron {expression}: never falls due"
    return when


def _duration(text: str) -> timedelta | str:
    """`90s`, `20m`, `1h30m`, `2 hours`, `1 day`: the interval (1 second to 366 days), or
    what is wrong."""
    compact = text.lower().replace(" ", "")
    seconds, pos = 0, 0
    for match in _PART.finditer(compact):
        unit = _WORDS.get(match[2], match[2])
        if match.start() != pos or unit not in _UNITS:
            break
        seconds += int(match[1]) * _UNITS[unit]
        pos = match.end()
        if seconds > MAX_EVERY.total_seconds():
            return f"{text}: an interval is from 1 second to 366 days"
    else:
        if pos == len(compact) and pos:
            if seconds < MIN_EVERY.total_seconds():
                return f"{text}: an interval is from 1 second to 366 days"
            return timedelta(seconds=seconds)
    return f"{text!r} is not a duration such as 90s, 20m, 1h30m, 2 hours or 1 day"


def _compact(every: timedelta) -> str:
    seconds, parts = int(every.total_seconds()), []
    for unit, size in sorted(_UNITS.items(), key=lambda item: -item[1]):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def due_after(when: When, zone: ZoneInfo, made: datetime, after: datetime) -> datetime | None:
    """The first due time strictly after `after` of a schedule made at `made` (None: it
    never falls due again, or not before the end of what a `datetime` holds). Never raises."""
    try:
        return _due_after(when, zone, made, after)
    except (OverflowError, ValueError):
        return None


def _due_after(when: When, zone: ZoneInfo, made: datetime, after: datetime) -> datetime | None:
    if when.every is not None:
        steps = max(int((after - made) / when.every) + 1, 1)
        due = made + steps * when.every
        return due if due > after else due + when.every
    if when.at is not None:
        return when.at if when.at > after else None
    return _cron_after(when.cron, zone, after)


def due_at_or_before(
    when: When, zone: ZoneInfo, made: datetime, moment: datetime
) -> datetime | None:
    """The latest due time at or before `moment` of a schedule made at `made` (None: none
    was due by then): the one a catch-up fires, however many fell due. Never raises."""
    try:
        return _due_at_or_before(when, zone, made, moment)
    except (OverflowError, ValueError):
        return None


def _due_at_or_before(
    when: When, zone: ZoneInfo, made: datetime, moment: datetime
) -> datetime | None:
    if when.every is not None:
        steps = int((moment - made) / when.every) if moment > made else 0
        return made + steps * when.every if steps >= 1 else None
    if when.at is not None:
        return when.at if when.at <= moment else None
    from croniter import CroniterError, croniter

    wall = _wall(moment, zone) + timedelta(seconds=1)
    try:
        times = croniter(when.cron, wall)
        for _ in range(_LOOKS):
            due = _wall_to_utc(times.get_prev(datetime), zone)
            if due <= moment:
                return due if due > made else None
    except (CroniterError, ValueError, OverflowError):
        return None
    return None


def _cron_after(expression: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    from croniter import CroniterError, croniter

    wall = after.astimezone(zone).replace(tzinfo=None)
    try:
        times = croniter(expression, wall)
        for _ in range(_LOOKS):
            due = _wall_to_utc(times.get_next(datetime), zone)
            if due > after:
                return due
    except (CroniterError, ValueError, OverflowError):
        return None
    return None


def _wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant a wall-clock time of `zone` names: the first of two (a repeated hour), or,
    for a time the zone skips, the first moment after the gap."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    early, late = min(first, second), max(first, second)
    if early == late or _wall(early, zone) == wall:
        return early  # an ordinary time, or the first of a repeated one
    # In a gap: the wall clock jumps from before `wall` to after it somewhere in (early, late].
    low, high = early, late
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if _wall(middle, zone) > wall:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


def _wall(moment: datetime, zone: ZoneInfo) -> datetime:
    return moment.astimezone(zone).replace(tzinfo=None)
