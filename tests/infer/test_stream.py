"""The fold of server chunks into events and one completion."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.loopd.infer import END, NEED_DATA, ChunkFold, ProtocolError, SSEDecoder, Stream
from boxmaker.testing._wire import ChunkWriter

from .test_sse import splits

W = ChunkWriter("chatcmpl-test", "model.gguf", 1795990732)
USAGE = W.usage(cache_n=10, prompt_n=5, predicted_n=4, prompt_ms=12.5, predicted_ms=30.0)


def fold(stream: bytes, cap: int | None = None) -> tuple[list[p.ChatEvent], p.Completion]:
    decoder, folder = SSEDecoder(), ChunkFold(thinking_cap=cap)
    events: list[p.ChatEvent] = []
    decoder.receive_data(stream)
    decoder.receive_data(b"")
    while (payload := decoder.next_event()) not in (NEED_DATA, END):
        assert isinstance(payload, str)
        events += folder.feed(payload)
    return events, folder.finish()


def test_content_and_reasoning_are_concatenated_and_progress_reported() -> None:
    stream = b"".join([
        W.progress(15, 10, 10, 0),
        W.progress(15, 10, 15, 3),
        W.role(),
        W.reasoning("Think"),
        W.reasoning(" hard"),
        W.content("Hello"),
        W.content(" you"),
        W.finish("stop"),
        USAGE,
        W.done(),
    ])  # fmt: skip
    events, completion = fold(stream)
    assert events == [
        p.Progress(total=15, cache=10, processed=10),
        p.Progress(total=15, cache=10, processed=15),
        p.Reasoning(text="Think"),
        p.Reasoning(text=" hard"),
        p.Content(text="Hello"),
        p.Content(text=" you"),
    ]
    assert completion == p.Completion(
        content="Hello you",
        reasoning_content="Think hard",
        tool_calls=None,
        finish_reason="stop",
        timings=p.Timings(cache_n=10, prompt_n=5, predicted_n=4, prompt_ms=12.5, predicted_ms=30.0),
        reasoning_tokens=2,
        thinking_capped=False,
    )


def test_absent_fields_are_none() -> None:
    _events, completion = fold(W.role() + W.finish("stop") + USAGE + W.done())
    assert (completion.content, completion.reasoning_content, completion.tool_calls) == (
        None,
        None,
        None,
    )


def test_tool_calls_assemble_by_index_and_a_later_name_replaces() -> None:
    stream = b"".join([
        W.role(),
        W.tool_call(0, "id-a", "find_too", '{"query"'),
        W.tool_call(1, "id-b", "clock", None),
        W.tool_arguments(0, ': "echo"}'),
        W.chunk({"tool_calls": [{"index": 0, "function": {"name": "find_tool"}}]}),
        W.tool_arguments(1, "{}"),
        W.finish("tool_calls"),
        USAGE,
        W.done(),
    ])  # fmt: skip
    events, completion = fold(stream)
    assert events[0] == p.ToolCallDelta(index=0, id="id-a", name="find_too", arguments='{"query"')
    assert events[3] == p.ToolCallDelta(index=0, id=None, name="find_tool", arguments="")
    assert completion.tool_calls == (
        p.ToolCall(id="id-a", name="find_tool", arguments='{"query": "echo"}'),
        p.ToolCall(id="id-b", name="clock", arguments="{}"),
    )
    assert completion.finish_reason == "tool_calls"


def test_timings_come_from_the_last_chunk_that_has_them() -> None:
    early = W.chunk({"content": "x"}, timings={"cache_n": 1, "prompt_n": 1, "predicted_n": 1,
                                              "prompt_ms": 1, "predicted_ms": 1})  # fmt: skip
    _events, completion = fold(early + W.finish("stop") + USAGE + W.done())
    assert completion.timings.cache_n == 10


def test_reaching_the_cap_emits_thinking_capped_once() -> None:
    stream = b"".join(
        [W.role(), *(W.reasoning(f"r{i}") for i in range(5)), W.finish("stop"), USAGE, W.done()]
    )
    events, completion = fold(stream, cap=3)
    assert [e for e in events if isinstance(e, p.ThinkingCapped)] == [p.ThinkingCapped(tokens=3)]
    assert events.index(p.ThinkingCapped(tokens=3)) == 3  # right after the third reasoning delta
    assert completion.thinking_capped is True
    assert completion.reasoning_tokens == 5
    _events, uncapped = fold(stream, cap=None)
    assert uncapped.thinking_capped is False


def test_an_error_event_mid_stream_is_a_stream_error() -> None:
    with pytest.raises(Stream) as caught:
        fold(W.role() + W.content("x") + W.error(500, "Invalid diff", "server_error"))
    assert (caught.value.code, caught.value.type) == (500, "server_error")
    assert "Invalid diff" in str(caught.value)


def test_a_stream_without_done_is_a_cut_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="before \\[DONE\\]") as caught:
        fold(W.role() + W.content("x") + W.finish("stop") + USAGE)
    assert caught.value.cut is True


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("{not json", "a stream chunk is not JSON"),
        ("[1]", "not an object"),
        ('{"choices": {}}', "'choices' to be list"),
        ('{"choices": [{"delta": {"content": 5}}]}', "'content' to be str"),
        ('{"choices": [{"delta": {"tool_calls": [{"function": {}}]}}]}', "'index' to be int"),
        ('{"prompt_progress": {"total": "9"}}', "'total' to be int"),
    ],
)
def test_chunks_of_the_wrong_shape_are_protocol_errors(payload: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        ChunkFold().feed(payload)


def test_anything_after_done_is_an_error() -> None:
    folder = ChunkFold()
    folder.feed("[DONE]")
    with pytest.raises(ProtocolError, match="after \\[DONE\\]"):
        folder.feed("[DONE]")


def test_missing_finish_reason_or_timings_is_an_error() -> None:
    with pytest.raises(ProtocolError, match="finish_reason and timings"):
        fold(W.role() + W.content("x") + W.done())


def test_a_tool_call_without_a_name_is_an_error() -> None:
    nameless = W.tool_arguments(0, "{}")
    with pytest.raises(ProtocolError, match="tool call 0 has no id or no name"):
        fold(W.role() + nameless + W.finish("tool_calls") + USAGE + W.done())


deltas = st.lists(
    st.one_of(
        st.text(min_size=1, max_size=6).map(W.content),
        st.text(min_size=1, max_size=6).map(W.reasoning),
        st.tuples(st.integers(0, 2), st.text(min_size=1, max_size=5)).map(
            lambda t: W.tool_call(t[0], f"id{t[0]}", f"tool{t[0]}", t[1])
        ),
        st.just(b":\n\n"),
    ),
    max_size=25,
)


def fold_chunks(chunks: list[bytes], cap: int) -> tuple[list[p.ChatEvent], p.Completion]:
    decoder, folder = SSEDecoder(), ChunkFold(thinking_cap=cap)
    events: list[p.ChatEvent] = []
    for chunk in [*chunks, b""]:
        decoder.receive_data(chunk)
        while (payload := decoder.next_event()) not in (NEED_DATA, END):
            assert isinstance(payload, str)
            events += folder.feed(payload)
    return events, folder.finish()


def stream_of(parts: list[bytes]) -> bytes:
    head = W.progress(9, 0, 9, 1) + W.role()
    return head + b"".join(parts) + W.finish("stop") + USAGE + W.done()


@given(deltas, st.lists(st.integers(0, 5000)), st.integers(1, 6))
def test_events_and_completion_are_identical_for_any_split(
    parts: list[bytes], cuts: list[int], cap: int
) -> None:
    stream = stream_of(parts)
    assert fold_chunks(splits(stream, cuts), cap) == fold(stream, cap)


def test_events_and_completion_are_identical_one_byte_at_a_time() -> None:
    parts = [W.reasoning("é"), W.content("✓ ok"), W.tool_call(0, "i", "clock", "{}"), b":\n\n"]
    stream = stream_of(parts)
    one_by_one = [stream[i : i + 1] for i in range(len(stream))]
    assert fold_chunks(one_by_one, 1) == fold(stream, 1)
