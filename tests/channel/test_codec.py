"""The frame codec: one JSON line a frame, at most 1 MiB, any split, every bad-frame case."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.channel import (
    END,
    MAX_FRAME,
    MORE_AFTER_TURN,
    NEED_DATA,
    BadFrame,
    FrameDecoder,
    LoopdConnection,
    Sending,
    encode_frame,
)

from ..infer.test_sse import splits
from ..strategies import frames

TURN = p.TurnFrame(session=p.SessionId("s1"), content="hi", resume=False)


def decode(chunks: list[bytes], max_frame: int = MAX_FRAME) -> list[object]:
    decoder = FrameDecoder(max_frame)
    out: list[object] = []
    for chunk in [*chunks, b""]:
        decoder.receive_data(chunk)
        while (frame := decoder.next_frame()) not in (NEED_DATA, END):
            out.append(frame)
    return out


def test_a_frame_is_one_json_line() -> None:
    assert encode_frame(TURN) == (
        b'{"kind":"turn","final":false,"body":{"session":"s1","content":"hi",'
        b'"resume":false,"thinking":true}}\n'
    )
    assert decode([encode_frame(TURN)]) == [TURN]


@given(st.lists(st.one_of(list(frames.values())), max_size=5), st.lists(st.integers(0, 2000)))
def test_any_split_gives_the_same_frames(items: list[p.Frame], cuts: list[int]) -> None:
    data = b"".join(encode_frame(f) for f in items)
    assert decode(splits(data, cuts)) == items
    assert decode([data[i : i + 1] for i in range(len(data))]) == items


BAD = [
    (b"not json\n", "not JSON"),
    (b"\n", "an empty line is not a frame"),
    (b"[1]\n", "expected an object @ $"),
    (b'{"kind":"hug","final":false,"body":{}}\n', "unknown kind 'hug' @ $.kind"),
    (b'{"kind":"turn","final":true,"body":{}}\n', "expected false for kind 'turn' @ $.final"),
    (b'{"kind":"turn","body":{}}\n', "missing field @ $.final"),
    (
        b'{"kind":"turn","final":false,"body":{"session":"s1","content":"hi"}}\n',
        "missing field @ $.body.resume",
    ),
    (
        b'{"kind":"turn","final":false,"body":{"session":"s1","content":5,"resume":false}}\n',
        "expected str @ $.body.content",
    ),
    (
        b'{"kind":"turn","final":false,"body":{"session":"../x","content":"hi","resume":false}}\n',
        "session id '../x' has a '/'",
    ),
    (b'{"kind":"turn","final":false,"body":{},"extra":1}\n', "unknown field @ $.extra"),
    (b'"\xff"\n', "not JSON: 'utf-8' codec can't decode"),
]


@pytest.mark.parametrize(("data", "reason"), BAD, ids=[b[1] for b in BAD])
def test_every_bad_frame_says_what_is_wrong(data: bytes, reason: str) -> None:
    [bad] = decode([data])
    assert isinstance(bad, BadFrame)
    assert bad.reason.startswith(reason) or reason in bad.reason


def test_a_frame_over_the_limit_is_refused_as_soon_as_it_passes_it() -> None:
    decoder = FrameDecoder(max_frame=100)
    decoder.receive_data(b"x" * 101)
    assert decoder.next_frame() == BadFrame("a frame is over the 100-byte limit")
    decoder.receive_data(b"y" * 10_000)  # the rest of the long line is skipped, not kept
    assert decoder.next_frame() is NEED_DATA
    decoder.receive_data(b"zz\n" + encode_frame(TURN))
    assert decoder.next_frame() == TURN


def test_the_real_limit_is_one_mebibyte() -> None:
    fits = p.TurnFrame(session=p.SessionId("s"), content="x" * (MAX_FRAME - 100), resume=False)
    assert decode([encode_frame(fits)]) == [fits]
    over = encode_frame(fits)[:-1] + b" " * 200 + b"\n"
    assert decode([over]) == [BadFrame(f"a frame is over the {MAX_FRAME}-byte limit")]
    with pytest.raises(ValueError, match="over the"):
        encode_frame(p.TurnFrame(session=p.SessionId("s"), content="x" * MAX_FRAME, resume=False))


def test_a_stream_ending_mid_frame_is_bad() -> None:
    assert decode([encode_frame(TURN)[:-1]]) == [
        BadFrame("the stream ended in the middle of a frame (no newline)")
    ]


# --- loopd's side of a connection: every rule of the channel in one object ----------------

DONE = p.TurnDoneFrame(content="ok", usage=p.Usage(0, 1, 1, 0, False))
EVENT = p.TurnEventFrame(event=p.Content(text="o"))


def fed(connection: LoopdConnection, data: bytes) -> object:
    connection.receive_data(data)
    return connection.next_event()


def test_a_connection_takes_one_turn_frame_then_sends_events_and_one_final_frame() -> None:
    connection = LoopdConnection()
    assert connection.next_event() is NEED_DATA
    assert fed(connection, encode_frame(TURN)) == TURN
    assert connection.send(EVENT) == encode_frame(EVENT)
    assert connection.send(DONE) == encode_frame(DONE)
    assert connection.state is Sending.DONE
    with pytest.raises(RuntimeError, match="after the final one"):
        connection.send(EVENT)


def test_a_frame_only_loopd_sends_is_refused_by_its_kind() -> None:
    bad = fed(LoopdConnection(), encode_frame(DONE))
    assert bad == BadFrame("a 'turn_done' frame is sent by loopd, not to it; send a 'turn' frame")


def test_anything_after_the_turn_frame_is_more_after_turn() -> None:
    together = LoopdConnection()  # sent with the turn frame
    assert fed(together, encode_frame(TURN) + b"{") == BadFrame(MORE_AFTER_TURN)
    later = LoopdConnection()  # sent while the turn runs
    assert fed(later, encode_frame(TURN)) == TURN
    assert fed(later, b"x") == BadFrame(MORE_AFTER_TURN)
    assert later.more_after_turn
    left = LoopdConnection()  # the end of the stream is the channel leaving, not a mistake
    fed(left, encode_frame(TURN))
    assert fed(left, b"") is END
    assert not left.more_after_turn


def test_an_event_before_the_turn_frame_is_loopd_s_bug() -> None:
    with pytest.raises(RuntimeError, match="before the request"):
        LoopdConnection().send(EVENT)
    refused = LoopdConnection()
    assert refused.refuse(BadFrame("no")) == encode_frame(p.WireError(p.ErrorCode.BAD_FRAME, "no"))
    assert refused.state is Sending.DONE
