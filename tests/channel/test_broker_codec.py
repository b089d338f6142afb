"""`broker.sock`'s rules, both sides in one place (`channel/broker_codec.py`): one request a
connection, each request with the answers it may get, whatever the split of the bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.channel import (
    END,
    NEED_DATA,
    BadFrame,
    BrokerClient,
    BrokerdConnection,
    Wrong,
    encode_frame,
)
from boxmaker.channel.broker_codec import ANSWERS

S1 = p.SessionId("s1")
CALL = p.CallFrame(p.ToolRequest(S1, 1, "echo", '{"text": "hi"}'))
RESPONSE = p.ResponseFrame(p.ResultResponse("hi", p.DataClass.PUBLIC, False, False))


def requested(data: bytes) -> object:
    connection = BrokerdConnection()
    if data:
        connection.receive_data(data)
    connection.receive_data(b"")
    return connection.next_request()


def test_brokerd_reads_one_request() -> None:
    assert requested(encode_frame(CALL)) == CALL
    assert requested(encode_frame(p.ListToolsFrame())) == p.ListToolsFrame()
    assert requested(b"") is END


def test_brokerd_refuses_more_after_the_request_and_a_frame_it_sends() -> None:
    more = requested(encode_frame(CALL) + b"{")
    assert isinstance(more, BadFrame)
    assert "more was sent" in more.reason
    sent_by_brokerd = requested(encode_frame(p.NotedFrame()))
    assert isinstance(sent_by_brokerd, BadFrame)
    assert "sent by brokerd" in sent_by_brokerd.reason
    connection = BrokerdConnection()
    assert connection.refusal(sent_by_brokerd) == p.WireError(
        p.ErrorCode.BAD_FRAME, sent_by_brokerd.reason
    )
    assert connection.refusal(END).message == "the stream ended before a frame"


def test_brokerd_answers_once_and_only_with_an_answer() -> None:
    connection = BrokerdConnection()
    with pytest.raises(RuntimeError, match="answers no request"):
        connection.answer(CALL)
    assert connection.answer(RESPONSE) == encode_frame(RESPONSE)
    with pytest.raises(RuntimeError, match="after the answer"):
        connection.answer(RESPONSE)


def test_an_answer_too_long_is_fitted_to_a_frame() -> None:
    long = p.ResponseFrame(p.ResultResponse("x" * (2 << 20), p.DataClass.PUBLIC, False, False))
    line = BrokerdConnection().answer(long)
    answer = p.structure(p.parse_json(line), p.BrokerFrame)
    assert isinstance(answer, p.ResponseFrame)
    assert answer.response.truncated


def test_the_client_sends_one_request_and_takes_only_its_answers() -> None:
    client = BrokerClient()
    with pytest.raises(RuntimeError, match="not a request"):
        client.send(RESPONSE)  # type: ignore[arg-type]
    assert client.send(CALL) == encode_frame(CALL)
    with pytest.raises(RuntimeError, match="one request"):
        client.send(CALL)
    assert client.next_answer() is NEED_DATA
    client.receive_data(encode_frame(p.NotedFrame()))
    assert client.next_answer() == Wrong(p.NotedFrame())  # noted answers session_changed


@pytest.mark.parametrize("request_frame", [CALL, p.ListToolsFrame(), p.SessionChangedFrame(S1)])
def test_an_error_answers_every_request(request_frame: p.BrokerFrame) -> None:
    client = BrokerClient()
    client.send(request_frame)  # type: ignore[arg-type]
    error = p.WireError(p.ErrorCode.BAD_FRAME, "no")
    client.receive_data(encode_frame(error))
    assert client.next_answer() == error
    assert p.WireError in ANSWERS[type(request_frame)]


@given(st.lists(st.integers(1, 40), max_size=12))
def test_the_answer_is_the_same_for_any_split(cuts: list[int]) -> None:
    data = encode_frame(RESPONSE)
    client = BrokerClient()
    client.send(CALL)
    at = 0
    for size in cuts:
        if piece := data[at : at + size]:
            client.receive_data(piece)
        at += size
    if rest := data[at:]:
        client.receive_data(rest)
    while (answer := client.next_answer()) is NEED_DATA:
        pass
    assert answer == RESPONSE
