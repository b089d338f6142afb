"""History at decreasing resolution: the summaries a new epoch opens with (SPEC section 17).
Pure.

Each epoch closes with the model's summary of its own turns (level 1: what came after the
summaries it opened with; `SUMMARY_INSTRUCTION`). The next epoch opens with the summaries of
the earlier ones, oldest first, each kept word for word as it was made, then that new one.
They share a budget (`[context] history_fraction` of the context), half of it for level 1, a
quarter for level 2 and a quarter for level 3. When the summaries of a level pass theirs, the
oldest of them (never the newest) are made into one summary of the level above, from those
summaries alone (`MERGE_INSTRUCTION`): so a summary is never made again from one of its own
level, and what an early epoch said fades only when it climbs a level, not at every epoch.
Level 3 is the last: past its budget, its oldest summaries leave the opening and are left to
`recall`, which finds every summary ever made in the logs (`epoch_end` keeps each).

A summary's part in the opening is a `SummaryPart` (`level`, the epochs it covers, its text):
`epoch_end.history` holds the ones before the new one, decided with it, so a switch a crash
interrupted opens the same epoch from the old log alone. A part keeps where its words came from
(`tainted`, `secret`: `provenance.py`): a summary of a tainted or secret conversation is so, a
merge of parts is whatever any of them is, and an epoch that opens with one is so too.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from attrs import frozen

from ..proto import EpochEndRecord, LogRecord, SummaryPart, SummaryRecord, Timestamp
from .log import Header

__all__ = [
    "LEGACY_PREFACE",
    "MAX_LEVEL",
    "MERGE_INSTRUCTION",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_REPLY",
    "Merge",
    "decided_parts",
    "end_parts",
    "merge_text",
    "merged",
    "named",
    "next_history",
    "opening_parts",
    "opening_summaries",
    "preface",
    "summary_part",
]

MAX_LEVEL = 3
# The request for an epoch's summary ends with this message (the conversation before it is
# what the server's cache already holds, the summaries the epoch opened with included).
SUMMARY_INSTRUCTION = (
    "Our conversation is about to be cut here to make room, and you will not see these "
    "messages again. Write a summary for yourself to carry on from, of what came after the "
    "summaries above (of all of it if there are none; those are kept as they are): the user's "
    "goals and preferences, the facts and decisions, what was done (with the important "
    "results of tools) and what is still open. Plain prose, no preamble, and do not call any "
    "tools."
)
MERGE_INSTRUCTION = (
    "Below are summaries you wrote of earlier parts of our conversation, oldest first. Write "
    "one shorter summary of them all for yourself to carry on from: keep the user's goals and "
    "preferences, the facts and decisions, and what is still open; leave out what no longer "
    "matters. Plain prose, no preamble, and do not call any tools."
)
SUMMARY_REPLY = "Understood. I will carry on from that summary."
# How a summary made before levels began (each one covered every epoch before its own).
LEGACY_PREFACE = (
    "A summary of our conversation before this point, which you wrote when it no longer "
    "fitted (the earlier messages are gone):\n\n"
)


def preface(part: SummaryPart) -> str:
    """The words before a summary in the user message that carries it."""
    if part.level == 1:
        return (
            f"A summary you wrote of {named(part)} of our conversation when it no longer "
            "fitted (its messages are gone):\n\n"
        )
    return (
        f"A shorter summary of {named(part)} of our conversation, made from your summaries "
        "of them (their messages are gone):\n\n"
    )


def decided_parts(records: Sequence[LogRecord], head: Header) -> list[SummaryPart]:
    """The summaries the epoch after one whose records end with its `epoch_end` opens with:
    its `history`, then the new summary of that epoch. An `epoch_end` written before levels
    (no `history`) after an opening from before levels holds a summary of every epoch so far,
    as the instruction then asked."""
    end = records[-1]
    assert isinstance(end, EpochEndRecord)
    opened = records[2 : head.carried_from]
    return end_parts(end, legacy=any(type(r) is SummaryRecord and r.first is None for r in opened))


def end_parts(end: EpochEndRecord, *, legacy: bool) -> list[SummaryPart]:
    """The summaries an `epoch_end` holds: its `history`, then its own summary, which is of
    every epoch so far when it was written before levels (no `history`) after an opening from
    before levels (`legacy`)."""
    parts = list(end.history)
    if end.summary is not None:
        first = 0 if legacy and not end.history else end.epoch
        parts.append(SummaryPart(1, first, end.epoch, end.summary, end.tainted, end.secret))
    return parts


def opening_summaries(parts: Sequence[SummaryPart], now: Timestamp) -> list[SummaryRecord]:
    """The summary records of an opening of `parts`."""
    return [
        SummaryRecord(
            now, preface(p) + p.text, SUMMARY_REPLY, p.level, p.first, p.last, p.tainted, p.secret
        )
        for p in parts
    ]


def opening_parts(records: Sequence[LogRecord], head: Header) -> list[SummaryPart]:
    """The summaries an epoch opened with, as parts, oldest first."""
    opened = records[2 : head.carried_from]
    return [summary_part(record, head.epoch) for record in opened if type(record) is SummaryRecord]


def summary_part(record: SummaryRecord, epoch: int) -> SummaryPart:
    """A summary record of epoch `epoch`'s opening as a part, its preface left out (one
    written before levels is a level-1 summary of every epoch before its own)."""
    if record.first is None or record.last is None:
        text = record.content.removeprefix(LEGACY_PREFACE)
        return SummaryPart(1, 0, max(epoch - 1, 0), text, record.tainted, record.secret)
    part = SummaryPart(record.level, record.first, record.last, "", record.tainted, record.secret)
    return attrs.evolve(part, text=record.content.removeprefix(preface(part)))


@frozen
class Merge:
    """The next step: make one summary of level `level + 1` from `parts` (the oldest of level
    `level`)."""

    level: int
    parts: tuple[SummaryPart, ...]


def _budget(level: int, total: float) -> float:
    """Level `level`'s share of the budget: a half for level 1, a quarter for level 2, and
    what is left (a quarter) for level 3."""
    share: float = 0.5**level if level < MAX_LEVEL else 0.5 ** (MAX_LEVEL - 1)
    return total * share


def next_history(
    parts: Sequence[SummaryPart], total: float, ratio: float
) -> Merge | list[SummaryPart]:
    """What the opening's summaries `parts` (oldest first) need next, within `total` tokens at
    `ratio` tokens a byte: a `Merge` of a level's oldest summaries, or the summaries to open
    with (level 3's oldest left out past its budget)."""

    def size(part: SummaryPart) -> float:
        return ratio * len(part.text.encode())

    for level in range(1, MAX_LEVEL + 1):
        at = [part for part in parts if part.level == level]
        budget, used = _budget(level, total), sum(map(size, at))
        oldest: list[SummaryPart] = []
        for part in at[:-1]:  # never the newest of a level
            if used <= budget:
                break
            oldest.append(part)
            used -= size(part)
        if not oldest:
            continue
        if level < MAX_LEVEL:
            return Merge(level, tuple(oldest))
        parts = [part for part in parts if part not in oldest]  # left to recall
    return list(parts)


def merged(parts: Sequence[SummaryPart], merge: Merge, text: str) -> list[SummaryPart]:
    """`parts` with `merge`'s replaced by one summary of the level above made of them (`text`),
    where the oldest of them stood."""
    of = merge.parts
    made = SummaryPart(
        merge.level + 1,
        of[0].first,
        of[-1].last,
        text,
        any(p.tainted for p in of),
        any(p.secret for p in of),
    )
    at = parts.index(merge.parts[0])
    kept = [part for part in parts if part not in merge.parts]
    return [*kept[:at], made, *kept[at:]]


def merge_text(merge: Merge) -> str:
    """The user message of a merge request: the instruction, then each summary."""
    said = [MERGE_INSTRUCTION]
    said += [f"{named(part).capitalize()}:\n{part.text}" for part in merge.parts]
    return "\n\n".join(said)


def named(part: SummaryPart) -> str:
    """The parts of the conversation a summary covers, as a person counts them (epochs from
    1): "part 3", "parts 1 to 4"."""
    if part.first == part.last:
        return f"part {part.first + 1}"
    return f"parts {part.first + 1} to {part.last + 1}"
