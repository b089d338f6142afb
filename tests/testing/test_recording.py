"""The .http recording format: exact bytes back, secrets never written, errors by line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.testing.recording import (
    Exchange,
    Recording,
    RecordingError,
    dump_recording,
    load_recording,
)

from ..strategies import json_values

SSE = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'
EXCHANGE = Exchange(
    method="POST",
    path="/v1/chat/completions",
    request_headers=(("Content-Type", "application/json"), ("Authorization", "Bearer sk-secret")),
    request_body={"messages": [{"role": "user", "content": "Hi ✓"}], "stream": True},
    status=200,
    reason="OK",
    response_headers=(("Content-Type", "text/event-stream"), ("Access-Control-Allow-Origin", "")),
    response_body=SSE,
)


def test_a_recording_reads_back_exactly_and_without_secrets() -> None:
    recording = Recording(comments=("Captured by the recorder.",), exchanges=(EXCHANGE,))
    data = dump_recording(recording)
    assert b"sk-secret" not in data
    assert b"Authorization" not in data
    text = data.decode()
    assert text.startswith("# Captured by the recorder.\n")
    assert ">>> POST /v1/chat/completions\n" in text
    assert '  "stream": true\n' in text  # the request body is indented JSON, for diffs
    response = "<<< 200 OK\nContent-Type: text/event-stream\nAccess-Control-Allow-Origin: \n"
    assert f"{response}body: {len(SSE)} bytes\n" in text
    loaded = load_recording(data)
    assert loaded.comments == recording.comments
    [exchange] = loaded.exchanges
    assert exchange.request_headers == (("Content-Type", "application/json"),)
    assert exchange.response_body == SSE
    assert exchange.request_body == EXCHANGE.request_body
    assert exchange.header("content-type") == "text/event-stream"


def test_a_recording_must_say_where_it_came_from() -> None:
    with pytest.raises(RecordingError, match="starts with a comment"):
        dump_recording(Recording(comments=(), exchanges=()))
    with pytest.raises(RecordingError, match="line 1: a recording starts with a '# ' comment"):
        load_recording(b">>> GET /health\n")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"# c\n\nGET /health\n", "line 3: expected '>>> METHOD PATH'"),
        (b"# c\n\n>>> GET /health\n\n<<< abc OK\n", "line 5: status 'abc' is not a number"),
        (b"# c\n\n>>> GET /health\n\n{bad\n<<< 200 OK\n", "line 5: the request body is not JSON"),
        (b"# c\n\n>>> GET /h\n\n<<< 200 OK\nbody: 10 bytes\nshort\n", "not 10 bytes followed by"),
        (b"# c\n\n>>> GET /h\n\n<<< 200 OK\nX: y\nbody: many bytes\n", "expected 'body: N bytes'"),
        (
            b"# c\n\n>>> GET /h\n\n<<< 200 OK\nnot a header\nbody: 0 bytes\n\n",
            "expected 'Name: value'",
        ),
    ],
)
def test_a_malformed_recording_names_the_line(data: bytes, message: str) -> None:
    with pytest.raises(RecordingError, match=message):
        load_recording(data)


header_text = (
    st.text(
        st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters=":"),
        min_size=1,
        max_size=12,
    )
    .map(str.strip)
    .filter(bool)
)
exchanges = st.builds(
    Exchange,
    method=st.sampled_from(["GET", "POST"]),
    path=st.from_regex(r"/[a-z/_.-]{0,20}", fullmatch=True),
    request_headers=st.lists(st.tuples(header_text, header_text), max_size=3).map(tuple),
    request_body=json_values,
    status=st.integers(100, 599),
    reason=header_text,
    response_headers=st.lists(st.tuples(header_text, header_text), max_size=3).map(tuple),
    response_body=st.binary(max_size=200),
)


@given(st.lists(exchanges, max_size=4))
def test_any_exchanges_round_trip(items: list[Exchange]) -> None:
    items = [
        ex
        for ex in items
        if all(k.lower() not in ("authorization", "cookie") for k, _ in ex.request_headers)
    ]
    recording = Recording(comments=("generated",), exchanges=tuple(items))
    assert load_recording(dump_recording(recording)) == recording
