"""The SSE decoder: the same payloads for any split of the bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.loopd.infer import END, NEED_DATA, SSEDecoder, SSEError


def decode(chunks: list[bytes]) -> list[str]:
    decoder = SSEDecoder()
    payloads: list[str] = []
    for chunk in [*chunks, b""]:
        decoder.receive_data(chunk)
        while (event := decoder.next_event()) not in (NEED_DATA, END):
            assert isinstance(event, str)
            payloads.append(event)
    assert decoder.next_event() is END
    return payloads


def splits(data: bytes, cuts: list[int]) -> list[bytes]:
    """`data` cut at `cuts`; no empty pieces (`b""` means the end of the stream)."""
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    return [piece for piece in pieces if piece]


SERVER_STREAM = (
    b'data: {"choices":[{"delta":{"content":"Hi \xc3\xa9"}}]}\n\n'
    b":\n\n"
    b'data: {"choices":[{"delta":{"content":"!"}}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_server_stream_gives_each_data_payload_and_skips_pings() -> None:
    assert decode([SERVER_STREAM]) == [
        '{"choices":[{"delta":{"content":"Hi é"}}]}',
        '{"choices":[{"delta":{"content":"!"}}]}',
        "[DONE]",
    ]


def test_line_endings_fields_and_multiline_data() -> None:
    data = b"event: x\r\nid: 1\r\ndata: a\r\ndata:b\r\n\r\ndata: c\rdata: d\r\r: comment\n\n"
    assert decode([data]) == ["a\nb", "c\nd"]


def test_an_event_without_its_blank_line_at_the_end_is_dropped() -> None:
    assert decode([b"data: one\n\ndata: tw"]) == ["one"]
    assert decode([b"data: one\n\ndata: two\n"]) == ["one"]


def test_a_carriage_return_at_a_chunk_edge_waits_for_the_next_byte() -> None:
    assert decode([b"data: a\r", b"\n\r", b"\n"]) == ["a"]


def test_need_data_until_an_event_is_complete() -> None:
    decoder = SSEDecoder()
    decoder.receive_data(b"data: x\n")
    assert decoder.next_event() is NEED_DATA
    decoder.receive_data(b"\n")
    assert decoder.next_event() == "x"
    assert decoder.next_event() is NEED_DATA


def test_data_that_is_not_utf8_is_an_error() -> None:
    with pytest.raises(SSEError, match="not UTF-8"):
        decode([b"data: \xff\n\n"])


def test_data_after_the_end_is_refused() -> None:
    decoder = SSEDecoder()
    decoder.receive_data(b"")
    with pytest.raises(RuntimeError):
        decoder.receive_data(b"data: x\n\n")


def test_one_byte_at_a_time_equals_whole() -> None:
    assert decode([bytes([b]) for b in SERVER_STREAM]) == decode([SERVER_STREAM])


sse_text = st.lists(
    st.one_of(
        st.text(max_size=20).map(lambda t: "data: " + t.replace("\r", "").replace("\n", "")),
        st.sampled_from([":", ": ping", "event: e", "id: 3", "retry: 10", "data", ""]),
    ),
    max_size=20,
)


@given(sse_text, st.sampled_from(["\n", "\r\n", "\r"]), st.lists(st.integers(0, 400)))
def test_any_split_gives_the_same_payloads(lines: list[str], end: str, cuts: list[int]) -> None:
    data = (end.join(lines) + end + end).encode()
    assert decode(splits(data, cuts)) == decode([data])
