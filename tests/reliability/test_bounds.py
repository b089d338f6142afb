"""The pure pieces behind the bounds: JSON depth and duplicate keys, the SSE line cap,
and long text split over frames (and joined again by the channel client)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.channel import MAX_FRAME, BadFrame, FrameDecoder, encode_frame, split_frame
from boxmaker.cli.chat_command import run_chat
from boxmaker.client import Channel
from boxmaker.loopd.infer.sse import SSEDecoder, SSEError

from ..cli.test_bxctl import args, fake_loopd

USAGE = p.Usage(1, 2, 3, 0, False)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_nested_up_to_100_levels_is_read_and_deeper_is_refused() -> None:
    assert p.parse_json(nested(100)) == eval(nested(100))
    for depth in (101, 999, 100_000):
        with pytest.raises(p.DecodeError, match="nested deeper than 100 levels"):
            p.parse_json(nested(depth))
    assert p.parse_json('"' + "[" * 500 + '"') == "[" * 500  # brackets in a string are text


def test_a_key_named_twice_is_refused_where_asked() -> None:
    twice = '{"session":"../../etc","session":"ok"}'
    assert p.parse_json(twice) == {"session": "ok"}  # log lines: loopd wrote them itself
    with pytest.raises(p.DecodeError, match="the key 'session' appears twice in one object"):
        p.parse_json(twice, unique_keys=True)
    with pytest.raises(p.DecodeError, match="the key 'a' appears twice"):
        p.parse_json('{"x":[{"a":1,"b":2,"a":3}]}', unique_keys=True)


def test_the_frame_decoder_refuses_a_duplicate_key_and_tells_what_is_left() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b'{"kind":"turn","kind":"turn","final":false,"body":{}}\n{"ki')
    assert decoder.next_frame() == BadFrame("the key 'kind' appears twice in one object")
    assert decoder.buffered() == 4


def feed(decoder: SSEDecoder, data: bytes, step: int) -> None:
    for i in range(0, len(data), step):
        decoder.receive_data(data[i : i + step])
        decoder.next_event()


def test_an_sse_line_or_event_over_the_cap_is_an_error_however_it_is_split() -> None:
    for data in (b"data: " + b"x" * 200, b"data: xx\n" * 40):
        for step in (len(data), 7, 1):
            with pytest.raises(SSEError, match="over the 100-byte limit"):
                feed(SSEDecoder(max_line=100), data, step)
    decoder = SSEDecoder(max_line=100)
    decoder.receive_data(b"data: " + b"x" * 90 + b"\n\n")  # at the limit: fine
    assert decoder.next_event() == "x" * 90


texts = st.text(
    alphabet=st.sampled_from(["a", "é", "漢", "🙂", '"', "\\", "\n", "\x01", "\x1b", "\u2028"]),
    max_size=3000,
)


@given(texts)
def test_split_frame_keeps_every_character_and_fits_each_frame(text: str) -> None:
    limit = 4096 + 200  # room for the frame, and 200 bytes of text
    for frame in (p.TurnEventFrame(p.Content(text)), p.TurnEventFrame(p.Reasoning(text))):
        parts = split_frame(frame, limit)
        assert all(len(p.dumps(part)) <= limit for part in parts)
        assert all(type(part.event) is type(frame.event) for part in parts)  # type: ignore[union-attr]
        assert "".join(part.event.text for part in parts) == text  # type: ignore[union-attr]
    *first, last = split_frame(p.TurnDoneFrame(text, USAGE), limit)
    assert all(isinstance(part, p.TurnDonePartFrame) for part in first)
    assert last == p.TurnDoneFrame(last.content, USAGE)  # type: ignore[union-attr]
    assert "".join(part.content for part in [*first, last]) == text  # type: ignore[union-attr]


def test_a_short_frame_is_not_split_and_a_long_error_is_cut() -> None:
    short = p.TurnEventFrame(p.Content("Hello."))
    assert split_frame(short) == [short]
    (error,) = split_frame(p.WireError(p.ErrorCode.INTERNAL, "x" * 2_000_000))
    assert len(encode_frame(error)) <= 1024 * 1024 + 1
    assert error.message.endswith(" … (cut to fit a frame)")  # type: ignore[union-attr]


async def test_the_channel_client_joins_the_parts_of_a_long_answer() -> None:
    ours, theirs = trio.socket.socketpair()
    answer = "word " * 500_000  # 2.5 MB
    frames = [p.TurnEventFrame(p.Content("w")), *split_frame(p.TurnDoneFrame(answer, USAGE))]
    assert len(frames) > 3
    channel = Channel(trio.SocketStream(ours), Path("loop.sock"))
    async with trio.SocketStream(theirs) as loopd, channel, trio.open_nursery() as nursery:
        nursery.start_soon(loopd.send_all, b"".join(encode_frame(f) for f in frames))
        assert await channel.receive() == frames[0]
        assert await channel.receive() == p.TurnDoneFrame(answer, USAGE)


async def test_bxctl_json_prints_a_long_answer_in_frames_as_loopd_sent_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = "x" * 1_200_000 + "\n" + "line\n" * 200  # one line over a frame, for --json=lines
    frames = [p.TurnEventFrame(p.Content(answer)), p.TurnDoneFrame(answer, USAGE)]
    sent = [part for frame in frames for part in split_frame(frame)]
    for batching in ("--json", "--json=lines"):
        async with fake_loopd(tmp_path, [sent]):
            code = await run_chat(args(tmp_path, batching, "--session", "s1", "--say", "Hi"), {})
        assert code == 0
        lines = capsys.readouterr().out.splitlines()
        assert all(len(line.encode()) <= MAX_FRAME for line in lines)
        got = [p.loads(p.Frame, line) for line in lines[1:]]  # after bxctl's session frame
        texts = [f.event.text for f in got if isinstance(f, p.TurnEventFrame)]
        parts = [f.content for f in got if isinstance(f, p.TurnDonePartFrame | p.TurnDoneFrame)]
        assert "".join(texts) == "".join(parts) == answer
        assert isinstance(got[-1], p.TurnDoneFrame)
