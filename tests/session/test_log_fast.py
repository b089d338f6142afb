"""Resume reads a log the fast way where it can (`session/log.py`): for every log, whole or
damaged, it gives what the detailed way gives: the same records and chain end, or the same
error naming the same line for the same reason. And `finished_writes`, which reads each line
once, gives what reading the log again without its cut write gives."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.session import Link, Log, TornLog, finished_writes, parse_log, seal

from ..strategies import records

GENESIS = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
PATH = Path("sessions/s/0.jsonl")
OTHERS = st.one_of([s for cls, s in records.items() if cls is not p.SessionStartRecord])
DEEP = b"[" * 101 + b"]" * 101

TEXT = re.compile(rb'"(content|reasoning_content|tool_call_id|arguments|reply|summary|first)":"')


def _text(raw: bytes, inserted: bytes) -> bytes:
    """`inserted` at the start of the record's first text field (the record as it was when it
    has none)."""
    found = TEXT.search(raw)
    return raw if found is None else raw[: found.end()] + inserted + raw[found.end() :]


def _number(raw: bytes, instead: bytes) -> bytes:
    """The record's first count (`..._n`, `call`, `ms`) written as `instead`."""
    return re.sub(rb'(_n|call|ms)":\d+', rb'\1":' + instead, raw, count=1)


# Changes to a record's JSON text before its line is sealed: the chain holds, the JSON or the
# record may not.
EDITS: dict[str, Any] = {
    "none": lambda raw: raw,
    "lone surrogate": lambda raw: _text(raw, b"\\ud800"),
    "low surrogate alone": lambda raw: _text(raw, b"\\uDC00"),
    "escaped letter": lambda raw: _text(raw, b"\\u0041"),
    "surrogate pair": lambda raw: _text(raw, b"\\ud83d\\ude00"),
    "escaped backslash": lambda raw: _text(raw, b"\\\\ud800"),
    "bad escape": lambda raw: _text(raw, b"\\x41"),
    "control character": lambda raw: _text(raw, b"\x01"),
    "bad utf-8": lambda raw: _text(raw, b"\xff"),
    "white space": lambda raw: raw.replace(b",", b", ", 1),
    "seq inside": lambda raw: raw[:-1] + b',"seq":7}',
    "type twice": lambda raw: raw[:-1] + b',"type":"user"}',
    "extra key": lambda raw: raw[:-1] + b',"extra":1}',
    "deep": lambda raw: raw[:-1] + b',"deep":' + DEEP + b"}",
    "deep text": lambda raw: _text(raw, b'",' + b'"d":' + DEEP + b',"e":"'),
    "key dropped": lambda raw: raw[: raw.rfind(b',"')] + b"}",
    "float": lambda raw: _number(raw, b"1.5e1"),
    "big int": lambda raw: _number(raw, b"12345678901234567890123"),
    "NaN": lambda raw: _number(raw, b"NaN"),
    "true for 1": lambda raw: _number(raw, b"true"),
    "type not a string": lambda raw: raw.replace(b'"type":', b'"type":["x"],"t":', 1),
    "bad time": lambda raw: re.sub(rb"(\d\d:\d\d:\d\d)\.", rb"\1,", raw, count=1),
    "time out of range": lambda raw: re.sub(rb'"time":"\d{4}-', b'"time":"0000-', raw, count=1),
    "not an object": lambda raw: b"[" + raw + b"]",
    "closed before the chain": lambda raw: raw + b"}",
    "text after the object": lambda raw: raw + b' "more"}',
}


# Changes to a sealed line: the chain itself.
def _tail(line: bytes, old: bytes, new: bytes) -> bytes:
    at = line.rfind(old)
    return line[:at] + new + line[at + len(old) :] if at > 0 else line


def _sealed_again(line: bytes, seq_change: int, prev: str | None) -> bytes:
    """The line's record sealed again, its hash right, after another `seq` or `prev`."""
    at = line.rfind(b',"seq":')
    end = line.find(b",", at + 1)
    if at < 0 or end < 0 or b'"prev":"' not in line[at:]:  # a line without a chain's tail
        return line
    seq = int(line[at + 7 : end])
    old_prev = line[line.rfind(b'"prev":"') + 8 :][:64].decode()
    return seal(line[:at] + b"}", Link(seq - 1 + seq_change, prev or old_prev))[0]


TAILS: dict[str, Any] = {
    "another prev, hash made again": lambda line: _sealed_again(line, 0, "0" * 64),
    "another seq, hash made again": lambda line: _sealed_again(line, 1, None),
    "none": lambda line: line,
    "seq zero-padded": lambda line: _tail(line, b'"seq":', b'"seq":0'),
    "seq as text": lambda line: _tail(line, b'"prev":', b'"q":0,"prev":'),
    "prev deep": lambda line: _tail(line, b'"prev":"', b'"prev":' + DEEP + b',"p":"'),
    "hash upper": lambda line: line[:-20] + line[-20:].upper(),
    "no hash": lambda line: line[: line.rfind(b',"hash"')] + b"}\n",
    "space before newline": lambda line: line[:-1] + b" \n",
    "unchained": lambda line: line[: line.rfind(b',"seq"')] + b"}\n",
}


@st.composite
def log_data(draw: st.DrawFn) -> bytes:
    """A log: sometimes lines written before the chain, then chained lines, some of whose
    records or chain members are changed, then maybe bytes changed, a line dropped or two
    swapped, or its end cut."""
    start = draw(records[p.SessionStartRecord])
    rest = draw(st.lists(OTHERS, max_size=6))
    legacy = draw(st.integers(0, len(rest) + 1)) if draw(st.integers(0, 4)) == 0 else 0
    link, lines, before = Link(0, GENESIS), [], hashlib.sha256()
    for number, record in enumerate([start, *rest], start=1):
        raw = p.dumps(record)
        if draw(st.integers(0, 3)) == 0:
            raw = EDITS[draw(st.sampled_from(sorted(EDITS)))](raw)
        if number <= legacy:
            line = raw + b"\n"
            before.update(line)
            link = Link(number, before.hexdigest())  # what the first chained line follows
        else:
            line, link = seal(raw, link)
        if draw(st.integers(0, 5)) == 0:
            line = TAILS[draw(st.sampled_from(sorted(TAILS)))](line)
        lines.append(line)
    change = draw(st.sampled_from(["none", "none", "flip", "drop", "swap", "cut"]))
    if change == "drop" and len(lines) > 1:
        del lines[draw(st.integers(1, len(lines) - 1))]
    elif change == "swap" and len(lines) > 2:
        at = draw(st.integers(1, len(lines) - 2))
        lines[at], lines[at + 1] = lines[at + 1], lines[at]
    data = b"".join(lines)
    if change == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
    elif change == "cut" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    return data


def outcome(read: Any, data: bytes) -> tuple[Any, ...]:
    try:
        return "read", read(data)
    except TornLog as error:
        return "refused", type(error), error.path, error.line, error.reason


def strict(data: bytes) -> Log:
    return parse_log(data, PATH, GENESIS, fast=False)


def fast(data: bytes) -> Log:
    return parse_log(data, PATH, GENESIS)


@given(log_data())
def test_the_fast_way_reads_and_refuses_every_log_as_the_detailed_way(data: bytes) -> None:
    assert outcome(fast, data) == outcome(strict, data)


def finished_writes_again(data: bytes) -> tuple[Log, int]:
    """`finished_writes` as it was: the log read, then read again without its last line when
    that is an `assistant` record (its `usage` was in the cut write)."""
    end = data.rfind(b"\n") + 1
    if end == len(data) or end == 0:
        return strict(data), len(data)
    if isinstance(strict(data[:end]).records[-1], p.AssistantRecord):
        end = data.rfind(b"\n", 0, end - 1) + 1
    return strict(data[:end]), end


@given(log_data(), st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b))
def test_finished_writes_reads_each_line_once_and_gives_what_reading_again_gives(
    data: bytes, torn: bytes
) -> None:
    def finished(d: bytes) -> tuple[Log, int]:
        return finished_writes(d, PATH, GENESIS)

    torn_data = data if data.endswith(b"\n") or not data else data + b"\n"
    for each in (data, torn_data + torn):
        assert outcome(finished, each) == outcome(finished_writes_again, each)


SAMPLES = [
    p.UsageRecord(p.Timestamp.parse("2026-11-29T21:31:35.000000Z"), 1, 2, 3, 4, False),
    p.UserRecord(p.Timestamp.parse("2026-11-29T21:31:35.000001Z"), "Hi"),
    p.AssistantRecord(
        p.Timestamp.parse("2026-11-29T21:31:36.000000Z"),
        None,
        "Thinking.",
        (p.ToolCall("call1", "clock", "{}"),),
    ),
    p.ToolResultRecord(
        p.Timestamp.parse("2026-11-29T21:31:37.000000Z"),
        1,
        "call1",
        "12:00",
        p.DataClass.PUBLIC,
        untrusted=False,
        truncated=False,
    ),
    p.TurnEndRecord(
        p.Timestamp.parse("2026-11-29T21:31:38.000000Z"), p.Outcome.DONE, 1, 1, 2, 1, 3, 400
    ),
]


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("tail", sorted(TAILS))
def test_each_change_of_a_line_is_read_as_the_detailed_way_reads_it(edit: str, tail: str) -> None:
    """Each change alone, on each kind of line after the first (hypothesis may draw some
    rarely)."""
    start = p.SessionStartRecord(
        time=p.Timestamp.parse("2026-11-29T21:31:34.000000Z"),
        session=p.SessionId("s"),
        epoch=0,
        slot="main",
        baseline=GENESIS,
    )
    first, link = seal(p.dumps(start), Link(0, GENESIS))
    for record in SAMPLES:
        second, after = seal(EDITS[edit](p.dumps(record)), link)
        third, _ = seal(p.dumps(SAMPLES[0]), after)
        data = first + TAILS[tail](second) + third
        assert outcome(fast, data) == outcome(strict, data)
        if edit == tail == "none":
            assert outcome(fast, data)[0] == "read"
