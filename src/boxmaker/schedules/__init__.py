"""Schedules (SPEC section 19): `schedules.jsonl` (`file.py`), what it says now and the records
its writers make (`book.py`), when a schedule falls due (`when.py`), and which due times fire
(`plan.py`). The file is blocking I/O (the daemons make the thread hops; bxctl reads and
writes it directly); the rules are pure."""

from .book import Book, Entry, Wanted, cancelled, made, next_shown, paused, resumed
from .file import GENESIS, SCHEDULES, SchedulesDamaged, schedules_file
from .plan import Fire, Held, Plan, firing_due, firing_session, header, origin_id
from .when import When, due_after, due_at_or_before, machine_zone, parse_when, zone_of

__all__ = [
    "GENESIS",
    "SCHEDULES",
    "Book",
    "Entry",
    "Fire",
    "Held",
    "Plan",
    "SchedulesDamaged",
    "Wanted",
    "When",
    "cancelled",
    "due_after",
    "due_at_or_before",
    "firing_due",
    "firing_session",
    "header",
    "machine_zone",
    "made",
    "next_shown",
    "origin_id",
    "parse_when",
    "paused",
    "resumed",
    "schedules_file",
    "zone_of",
]
