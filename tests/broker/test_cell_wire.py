"""The wire of a cell's interpreter, read sans-IO (`brokerd/sandbox/cell_wire.py`): what the
cell printed, cut into outputs, then its end, the same for any split of the bytes; every bad
end said."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.brokerd.sandbox.cell_wire import (
    MOST_DONE,
    CellEnd,
    CellReader,
    Cut,
    Lost,
    Printed,
    cell_request,
)
from boxmaker.sansio import NEED_DATA

NONCE = b"0123456789abcdef"


def ending(value: object = "2", error: object = None, nonce: bytes = NONCE) -> bytes:
    done = json.dumps({"value": value, "error": error}).encode()
    return b"\0bx-done %s %d\n" % (nonce, len(done)) + done


def cut(nonce: bytes = NONCE) -> bytes:
    return b"\0bx-cut %s\n" % nonce


def read(chunks: list[bytes], end: bool = False) -> tuple[bytes, CellEnd | Lost | None]:
    """What the cell printed (`|` where it was cut), and how it ended (None: it needs more)."""
    reader = CellReader(NONCE)
    printed = b""
    chunks = [c for c in chunks if c] + ([b""] if end else [])
    while True:
        event = reader.next_event()
        if isinstance(event, Printed):
            printed += event.data
        elif isinstance(event, Cut):
            printed += b"|"
        elif isinstance(event, CellEnd | Lost):
            return printed, event
        elif not chunks:
            return printed, None
        else:
            assert event is NEED_DATA
            reader.receive_data(chunks.pop(0))


def test_the_request_is_one_line_of_json() -> None:
    assert json.loads(cell_request("1 + 1", NONCE, cell="3@ab12cd", most=10)) == {
        "code": "1 + 1",
        "nonce": NONCE.decode(),
        "cell": "3@ab12cd",
        "most": 10,
    }
    assert cell_request("a\nb", NONCE).count(b"\n") == 1
    queued = cell_request("1", NONCE, keep=[("2@ab12cd", 1, "x\ny")], sh_last={"exit": 0})
    assert queued.count(b"\n") == 1
    assert json.loads(queued)["keep"] == [["2@ab12cd", 1, "x\ny"]]
    assert json.loads(queued)["sh_last"] == {"exit": 0}


def test_what_the_cell_printed_then_its_end() -> None:
    assert read([b"hello\n" + ending()]) == (b"hello\n", CellEnd({"value": "2"}))
    assert read([ending(None, "Traceback")]) == (b"", CellEnd({"error": "Traceback"}))


def test_each_cut_ends_an_output() -> None:
    data = b"a\n" + cut() + cut() + b"b" + cut() + ending()
    assert read([data]) == (b"a\n||b|", CellEnd({"value": "2"}))


@given(
    st.lists(st.binary(max_size=100), max_size=5),
    st.lists(st.integers(1, 50), max_size=20),
)
def test_the_same_for_any_split(outputs: list[bytes], cuts: list[int]) -> None:
    # a marker needs a NUL: no output can make one by chance
    outputs = [output.replace(b"\0", b"").replace(b"|", b"") for output in outputs]
    data = b"".join(output + cut() for output in outputs) + ending()
    chunks, at = [], 0
    for size in cuts:
        chunks.append(data[at : at + size])
        at += size
    chunks.append(data[at:])
    assert read(chunks) == (b"".join(o + b"|" for o in outputs), CellEnd({"value": "2"}))


def test_another_cell_s_marker_is_output() -> None:
    planted = cut(b"ffffffffffffffff") + ending("planted", nonce=b"ffffffffffffffff")
    assert read([planted + ending()]) == (planted, CellEnd({"value": "2"}))


def test_output_is_held_back_only_while_it_could_start_the_marker() -> None:
    printed, how = read([b"x" * 100])
    assert how is None
    assert printed == b"x" * (100 - len(b"\0bx-done ") - len(NONCE) - 1 - 24)


@pytest.mark.parametrize(
    ("tail", "said"),
    [
        (b"123456789012345\n{}", "not a cell's end"),  # the length line over 12 bytes
        (b"12x\n{}", "too long to take"),
        (b"%d\n" % (MOST_DONE + 1), "too long to take"),
        (b"4\nnope", "not a cell's end"),
        (b"2\n[]", "not a cell's end"),
    ],
)
def test_a_bad_end_is_lost_saying_why(tail: bytes, said: str) -> None:
    _, how = read([b"\0bx-done " + NONCE + b" " + tail])
    assert isinstance(how, Lost)
    assert said in how.reason


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"printing", "the interpreter ended"),
        (b"\0bx-done " + NONCE + b" 12", "not a cell's end"),
        (b"\0bx-done " + NONCE + b" 12\n{", "the interpreter ended"),
    ],
)
def test_a_stream_that_ends_early_is_lost(data: bytes, said: str) -> None:
    _, how = read([data], end=True)
    assert isinstance(how, Lost)
    assert said in how.reason


def test_a_lone_surrogate_in_the_end_is_shown_escaped_so_the_answer_can_be_sent() -> None:
    # `raise ValueError("\ud800")`: the traceback holds a lone surrogate, which JSON carries
    # and UTF-8 cannot; brokerd's answer would fail to encode and the cell's result be lost.
    _, how = read([ending(None, 'ValueError: "\ud800"')])
    assert how == CellEnd({"error": 'ValueError: "\\ud800"'})
    assert isinstance(how, CellEnd)
    how.fields["error"].encode("utf-8")


def test_an_end_nested_past_the_stack_is_lost_not_a_crash() -> None:
    deep = b"[" * 200_000
    _, how = read([b"\0bx-done " + NONCE + b" %d\n" % len(deep) + deep])
    assert isinstance(how, Lost)
    assert "not a cell's end" in how.reason
