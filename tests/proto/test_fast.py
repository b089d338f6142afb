"""Every hand-written fast path (`proto/_fast.py`) gives what the general path gives: the same
bytes written, the same value or the same error read."""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.loopd.infer import encode_request, request_body

from ..helpers import make_config
from ..strategies import json_values, messages, others, records


@given(st.text(), st.sampled_from([p.Content, p.Reasoning]))
def test_the_fast_path_for_text_events_writes_the_same_bytes(text: str, kind: type) -> None:
    frame = p.TurnEventFrame(event=kind(text=text))
    assert p.dumps(frame) == p.encode(p.unstructure(frame))
    assert p.loads(p.Frame, p.dumps(frame)) == frame


def outcome(read: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "value", read(data)
    except p.DecodeError as exc:
        return "error", str(exc)


@st.composite
def record_lines(draw: st.DrawFn) -> bytes:
    """A record's JSON, often changed: a key dropped, a key added, a value replaced, or the
    whole written with white space."""
    raw = p.unstructure(draw(st.one_of(list(records.values()))))
    keys = sorted(raw)
    change = draw(st.sampled_from(["none", "drop", "add", "replace", "spaced"]))
    if change == "drop":
        del raw[draw(st.sampled_from(keys))]
    elif change == "add":
        raw[draw(st.text(max_size=12))] = draw(json_values)
    elif change == "replace":
        raw[draw(st.sampled_from(keys))] = draw(json_values)
    if change == "spaced":
        return json.dumps(raw, indent=1).encode()
    return json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode()


@given(record_lines())
def test_the_fast_path_for_log_records_reads_and_refuses_as_the_general_one(line: bytes) -> None:
    assert outcome(p.load_record, line) == outcome(lambda d: p.loads(p.LogRecord, d), line)


@given(record_lines())
def test_a_log_line_parsed_the_fast_way_is_a_plain_record_only_as_the_general_way_reads_it(
    line: bytes,
) -> None:
    value = p.parse_line(line + b"\n")
    record = p.plain_record(value) if type(value) is dict else None
    if record is not None:
        assert record == p.loads(p.LogRecord, line)


def test_the_fast_parse_of_a_log_line_reads_json_and_refuses_what_is_not_strict_json() -> None:
    line = p.dumps(p.UserRecord(p.Timestamp.parse("2026-11-29T21:31:35.000001Z"), "ünï ✓"))
    assert p.parse_line(line + b"\n") == p.parse_json(line)
    for bad in (b'{"a":NaN}', b'{"a":"\\ud800"}', b'{"a":"\xff"}', b'{"a":', b"null"):
        assert p.parse_line(bad + b"\n") is None, bad


@given(st.lists(st.one_of(list(messages.values())), max_size=6))
def test_the_fast_path_for_messages_writes_the_same_bytes(batch: list[Any]) -> None:
    assert p.encode_messages(batch) == p.encode([p.unstructure(m) for m in batch])


@given(
    others[p.ChatRequest],
    st.integers(0, 7),
    st.sampled_from(["", "[inference]\ntemperature = 0.5\nmax_tokens = 9\n"]),
)
def test_the_request_is_sent_as_the_bytes_of_its_body(
    request: p.ChatRequest, slot_id: int, config_text: str
) -> None:
    inference = make_config(config_text).inference
    body = request_body(request, slot_id, inference)
    assert encode_request(request, slot_id, inference) == p.encode(body)
    # The same tools and settings: what follows the messages comes from the kept bytes; with
    # thinking the other way, they are not the kept ones.
    for again in (
        attrs.evolve(request, messages=request.messages[:1]),
        attrs.evolve(request, thinking=not request.thinking),
    ):
        expected = p.encode(request_body(again, slot_id, inference))
        assert encode_request(again, slot_id, inference) == expected


def test_a_tool_result_without_attachments_takes_the_fast_way() -> None:
    """`kept` (left out when empty) must not send every `tool_result` the detailed way: resume
    reads one per call (it did, and resume took half again as long)."""
    from boxmaker.proto._fast import plain_record

    line = (b'{"type":"tool_result","time":"2026-01-01T00:00:00.000000Z","call":1,'
            b'"tool_call_id":"c","content":"x","class":"public","untrusted":true,'
            b'"truncated":false}')  # fmt: skip
    record = plain_record(p.parse_json(line))
    assert isinstance(record, p.ToolResultRecord)
    assert record.kept == ()
