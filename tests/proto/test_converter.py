"""The converter: round trips for every type, and one clear error for every bad input."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p

from ..strategies import ALL_TYPES, UNIONS, json_values


@pytest.mark.parametrize("cls", list(ALL_TYPES), ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_every_type_round_trips(cls: type, data: st.DataObject) -> None:
    value = data.draw(ALL_TYPES[cls])
    encoded = p.dumps(value)
    assert p.loads(cls, encoded) == value
    assert p.dumps(p.loads(cls, encoded)) == encoded


@pytest.mark.parametrize("name", list(UNIONS))
@given(data=st.data())
def test_every_union_round_trips_by_its_tag(name: str, data: st.DataObject) -> None:
    union, strategy = UNIONS[name]
    value = data.draw(strategy)
    assert p.loads(union, p.dumps(value)) == value


def test_json_is_compact_utf8_with_keys_in_spec_order() -> None:
    record = p.UsageRecord(
        time=p.Timestamp.parse("2026-11-29T21:31:34.123456Z"),
        cache_n=1,
        prompt_n=2,
        predicted_n=3,
        reasoning_tokens=4,
        thinking_capped=True,
    )
    assert p.dumps(record) == (
        b'{"type":"usage","time":"2026-11-29T21:31:34.123456Z","cache_n":1,"prompt_n":2,'
        b'"predicted_n":3,"reasoning_tokens":4,"thinking_capped":true}'
    )
    assert p.dumps(p.Content(text="é ✓")) == '{"type":"content","text":"é ✓"}'.encode()


def test_an_assistant_message_leaves_out_null_reasoning_and_tool_calls() -> None:
    assert p.dumps(p.AssistantMessage(content="hi")) == b'{"role":"assistant","content":"hi"}'


TURN_DONE_BAD_CACHE_N = (
    b'{"kind":"turn_done","final":true,"body":{"content":"x","usage":{"cache_n":"5",'
    b'"prompt_n":2,"predicted_n":3,"reasoning_tokens":4,"thinking_capped":false}}}'
)
TIME = '"time":"2026-11-29T21:31:34.123456Z"'
BAD_INPUT: list[tuple[str, Any, bytes, str]] = [
    ("wrong type, nested", p.Frame, TURN_DONE_BAD_CACHE_N, "expected int @ $.body.usage.cache_n"),
    ("not JSON", p.Frame, b"{nope", "not JSON: "),
    ("not UTF-8", p.Frame, b'"\xff"', "not JSON: 'utf-8' codec can't decode"),
    ("NaN", p.LogRecord, b"NaN", "not JSON: NaN is not JSON"),
    ("lone surrogate", p.ChatMessage, rb'{"role":"user","content":"\ud800"}', "not JSON: "),
    ("not an object", p.Frame, b"[1,2]", "expected an object @ $"),
    (
        "unknown kind",
        p.Frame,
        b'{"kind":"hello","final":true,"body":{}}',
        "unknown kind 'hello' @ $.kind",
    ),
    ("missing kind", p.Frame, b'{"final":true,"body":{}}', "missing field @ $.kind"),
    (
        "final wrong for its kind",
        p.Frame,
        b'{"kind":"turn_done","final":false,"body":{}}',
        "expected true for kind 'turn_done' @ $.final",
    ),
    (
        "extra key on a frame",
        p.Frame,
        b'{"kind":"turn","final":false,"body":{},"x":1}',
        "unknown field @ $.x",
    ),
    (
        "unknown event type",
        p.Frame,
        b'{"kind":"turn_event","final":false,"body":{"event":{"type":"weird"}}}',
        "unknown type 'weird' @ $.body.event.type",
    ),
    (
        "missing tag",
        p.TurnEvent,
        b'{"ahead":1}',
        "missing field @ $.type",
    ),
    (
        "a chat event is not a turn event",
        p.TurnEvent,
        b'{"type":"tool_call_delta","index":0,"id":null,"name":null,"arguments":""}',
        "unknown type 'tool_call_delta' @ $.type",
    ),
    (
        "unknown field",
        p.TurnEvent,
        b'{"type":"queued","ahead":1,"behind":2}',
        "unknown field @ $.behind",
    ),
    (
        "bool is not an int",
        p.TurnEvent,
        b'{"type":"queued","ahead":true}',
        "expected int @ $.ahead",
    ),
    (
        "float is not an int",
        p.TurnEvent,
        b'{"type":"queued","ahead":1.0}',
        "expected int @ $.ahead",
    ),
    (
        "missing field",
        p.LogRecord,
        f'{{"type":"user",{TIME}}}'.encode(),
        "missing field @ $.content",
    ),
    (
        "invalid session id",
        p.Frame,
        b'{"kind":"turn","final":false,"body":{"session":"../etc","content":"hi","resume":false}}',
        "session id '../etc' has a '/'; allowed: letters, digits, '.', '_', '-' @ $.body.session",
    ),
    (
        "bad time",
        p.LogRecord,
        b'{"type":"user","time":"2026-11-29 21:31:34","content":"x"}',
        "time '2026-11-29 21:31:34' is not RFC 3339 UTC",
    ),
    (
        "bad enum value, named by its JSON key",
        p.LogRecord,
        f'{{"type":"tool_result",{TIME},"call":1,"tool_call_id":"a","content":"",'
        '"class":"top","untrusted":false,"truncated":false}'.encode(),
        "expected one of 'public', 'private', 'secret' @ $.class",
    ),
    (
        "validator names its field",
        p.LogRecord,
        f'{{"type":"session_start",{TIME},"session":"s","epoch":0,"slot":"main",'
        '"baseline":"zz"}'.encode(),
        "'zz' is not a sha256 in lowercase hex @ $.baseline",
    ),
    (
        "a string is not an array",
        p.LogRecord,
        f'{{"type":"assistant",{TIME},"content":null,"reasoning_content":null,'
        '"tool_calls":"abc"}'.encode(),
        "expected an array @ $.tool_calls",
    ),
    (
        "tool call not of type function, by index",
        p.LogRecord,
        f'{{"type":"assistant",{TIME},"content":null,"reasoning_content":null,'
        '"tool_calls":[{"id":"a","type":"fn","function":{"name":"x","arguments":"{}"}}]}'.encode(),
        "expected 'function' @ $.tool_calls[0].type",
    ),
    (
        "tool call function missing arguments",
        p.LogRecord,
        f'{{"type":"assistant",{TIME},"content":null,"reasoning_content":null,'
        '"tool_calls":[{"id":"a","type":"function","function":{"name":"x"}}]}'.encode(),
        "missing field @ $.tool_calls[0].function.arguments",
    ),
    (
        "a record read as another",
        p.UserRecord,
        f'{{"type":"cache_loss",{TIME},"expected":1,"got":0}}'.encode(),
        "expected 'user' @ $.type",
    ),
]


@pytest.mark.parametrize(
    ("case", "tp", "data", "message"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT]
)
def test_bad_input_raises_one_error_naming_the_path(
    case: str, tp: Any, data: bytes, message: str
) -> None:
    with pytest.raises(p.DecodeError) as caught:
        p.loads(tp, data)
    assert str(caught.value).startswith(message), case


@given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_arbitrary_bytes_give_a_value_or_a_decode_error(data: bytes) -> None:
    for tp in (p.Frame, p.LogRecord, p.TurnEvent):
        with contextlib.suppress(p.DecodeError):
            p.loads(tp, data)


FIELD_NAMES = ["session", "content", "resume", "thinking", "event", "usage", "code", "message"]
frame_like = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["turn", "turn_event", "turn_done", "error"]) | json_values,
        "final": st.booleans() | json_values,
        "body": st.dictionaries(st.sampled_from(FIELD_NAMES), json_values) | json_values,
        "x": json_values,
    },
)


@given(frame_like)
def test_arbitrary_json_objects_give_a_frame_or_a_decode_error(raw: dict[str, Any]) -> None:
    try:
        frame = p.structure(raw, p.Frame)
    except p.DecodeError as exc:
        message = str(exc)
    else:
        message = " @ $ (decoded)"
        assert p.structure(p.unstructure(frame), p.Frame) == frame
    assert " @ $" in message


@given(json_values)
def test_the_spaced_form_is_the_standard_library_s_own(value: Any) -> None:
    # The hints loopd keeps and the recall index's places have always been written so.
    assert p.spaced(value) == json.dumps(value)


@given(json_values, st.sampled_from(["", " ", "\n", " \t\r\n"]))
def test_json_with_or_without_white_space_parses_as_the_standard_library_does(
    value: Any, space: str
) -> None:
    text = space + json.dumps(value, ensure_ascii=False) + space
    assert p.parse_json(text.encode()) == json.loads(text)
