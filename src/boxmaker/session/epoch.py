"""Epochs: a conversation that outlives the server's context, in parts. Pure.

A session's files are `<n>.baseline.json` and `<n>.jsonl` for each epoch n = 0, 1, 2, ...; the
current epoch is the highest n with a log, and only its two files are ever read to resume.
Each log has its own hash chain from its own baseline. An epoch after the first opens with:

    session_start {epoch: n, baseline: sha256 of <n>.baseline.json}
    epoch_start {epoch: n, created, turns, done, first, calls, carried_turns}
    summary {content, reply}         when the model made a summary of what came before
    the newest `carried_turns` turns of epoch n - 1, copied whole, record for record

and then goes on with its own turns. A closed epoch ends with `epoch_end`: the decision to open
the next, holding the summary and how many turns it carries. `opening()` makes the next
epoch's first records from the closed epoch's records alone, so a switch interrupted by a
crash after its `epoch_end` is finished from the disk without asking the model again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..proto import (
    EpochEndRecord,
    EpochStartRecord,
    LogRecord,
    Outcome,
    SessionStartRecord,
    SummaryRecord,
    Timestamp,
    TurnEndRecord,
    UserRecord,
)
from .index import Index
from .replay import next_call, starts_turn

__all__ = [
    "SUMMARY_INSTRUCTION",
    "SUMMARY_PREFACE",
    "SUMMARY_REPLY",
    "baseline_name",
    "epochs_in",
    "log_name",
    "opening",
    "tail_turns",
]

# The request for a summary ends with this message (the conversation before it is what the
# server's cache already holds). The new epoch then opens with the preface and the summary
# as a user message and the fixed reply as the assistant's, so the roles alternate.
SUMMARY_INSTRUCTION = (
    "Our conversation is about to be cut here to make room, and you will not see it again. "
    "Write a summary of it for yourself to carry on from: the user's goals and preferences, "
    "the facts and decisions, what was done (with the important results of tools) and what "
    "is still open. Plain prose, no preamble, and do not call any tools."
)
SUMMARY_PREFACE = (
    "A summary of our conversation before this point, which you wrote when it no longer "
    "fitted (the earlier messages are gone):\n\n"
)
SUMMARY_REPLY = "Understood. I will carry on from that summary."

_LOG = re.compile(r"(0|[1-9][0-9]{0,8})\.jsonl")


def log_name(epoch: int) -> str:
    return f"{epoch}.jsonl"


def baseline_name(epoch: int) -> str:
    return f"{epoch}.baseline.json"


def epochs_in(names: Iterable[str]) -> list[int]:
    """The epochs whose log is among a folder's `names`, in order (the last is current)."""
    return sorted(int(match[1]) for name in names if (match := _LOG.fullmatch(name)))


def tail_turns(records: Sequence[LogRecord], end: int) -> list[int]:
    """Where the whole turns that end `records[:end]` start (each a `user` record through its
    `turn_end`, a soft break's message inside it), oldest first: the turns an epoch switch may
    carry."""
    starts: list[int] = []
    at = end - 1
    while at > 0 and type(records[at]) is TurnEndRecord:
        begin = at - 1
        while begin > 0 and not (
            type(records[begin]) is UserRecord and starts_turn(records, begin)
        ):
            if type(records[begin]) is TurnEndRecord:
                return starts[::-1]  # a turn_end without a user record before it
            begin -= 1
        if begin <= 0:
            break
        starts.append(begin)
        at = begin - 1
    return starts[::-1]


def opening(
    records: Sequence[LogRecord], index: Index, now: Timestamp, baseline: str
) -> list[LogRecord]:
    """The first records of the epoch after the one whose records (ending with its
    `epoch_end`) are given; `index` is that epoch's index and `baseline` the sha256 of the new
    epoch's baseline file."""
    end = records[-1]
    start = records[0]
    assert isinstance(end, EpochEndRecord)
    assert isinstance(start, SessionStartRecord)
    starts = tail_turns(records, len(records) - 1)
    carried_turns = min(end.carried_turns, len(starts))
    carried = list(records[starts[-carried_turns] : -1]) if carried_turns else []
    done = sum(type(r) is TurnEndRecord and r.outcome is Outcome.DONE for r in carried)
    epoch = end.epoch + 1
    opened: list[LogRecord] = [
        SessionStartRecord(
            time=now, session=start.session, epoch=epoch, slot=start.slot, baseline=baseline
        ),
        EpochStartRecord(
            time=now,
            epoch=epoch,
            created=index.created,
            turns=index.turns - carried_turns,
            done=index.done - done,
            first=index.first,
            calls=next_call(records) - 1,
            carried_turns=carried_turns,
        ),
    ]
    if end.summary is not None:
        opened.append(
            SummaryRecord(time=now, content=SUMMARY_PREFACE + end.summary, reply=SUMMARY_REPLY)
        )
    return opened + carried
