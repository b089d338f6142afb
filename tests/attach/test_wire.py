"""Files in a turn on the wire (SPEC section 22): the `attach` frame and its pieces, read by
loopd's side of a connection; what a turn frame and a `user` record say of files; an image
as a user message carries it."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker import proto as p
from boxmaker.channel import BadFrame, LoopdConnection, Piece, Sending, encode_frame
from boxmaker.config import InferenceConfig
from boxmaker.loopd.infer import encode_request, request_body
from boxmaker.proto._fast import encode_messages

DATA = bytes(range(256)) * 5000  # 1,280,000 bytes: three pieces


def offer(data: bytes = DATA, name: str = "notes.txt") -> p.FileOffer:
    return p.FileOffer(name, "text/plain", len(data), hashlib.sha256(data).hexdigest())


def pieces(data: bytes) -> list[bytes]:
    return [
        encode_frame(p.FilePieceFrame(base64.b64encode(data[at : at + p.PIECE_BYTES]).decode()))
        for at in range(0, len(data), p.PIECE_BYTES)
    ]


def read_all(wire: bytes, split: int = 1 << 20) -> tuple[list[object], LoopdConnection]:
    connection = LoopdConnection()
    out: list[object] = []
    for at in range(0, len(wire), split):
        connection.receive_data(wire[at : at + split])
        while True:
            event = connection.next_event()
            if not isinstance(event, p.AttachFrame | Piece | BadFrame):
                break
            out.append(event)
    return out, connection


@given(st.integers(min_value=1000, max_value=1 << 20))
def test_a_file_comes_whole_in_pieces_whatever_the_split(split: int) -> None:
    wire = encode_frame(p.AttachFrame(offer())) + b"".join(pieces(DATA))
    out, connection = read_all(wire, split)
    assert out[0] == p.AttachFrame(offer())
    got = [event for event in out[1:] if isinstance(event, Piece)]
    assert b"".join(piece.data for piece in got) == DATA
    assert [piece.last for piece in got] == [False, False, True]
    assert connection.state is Sending.TURN  # whole: only loopd's answer is left


def test_more_bytes_than_the_attach_said_are_a_bad_frame() -> None:
    short = offer(DATA[:1000])
    wire = encode_frame(p.AttachFrame(short)) + pieces(DATA[:2000])[0]
    out, _ = read_all(wire)
    assert out[1] == BadFrame("a file_piece holds 1 to 1000 bytes here, not 2000")


@pytest.mark.parametrize(
    ("frame", "said"),
    [
        (encode_frame(p.FilePieceFrame("not base64!")), "a file_piece's data is not base64"),
        (encode_frame(p.FilePieceFrame("")), "a file_piece holds 1 to 1000 bytes here, not 0"),
        (encode_frame(p.StopFrame(p.SessionId("s1"))), "file_piece' frames, not 'stop'"),
    ],
)
def test_anything_but_a_piece_after_an_attach_is_a_bad_frame(frame: bytes, said: str) -> None:
    out, _ = read_all(encode_frame(p.AttachFrame(offer(DATA[:1000]))) + frame)
    assert isinstance(out[1], BadFrame)
    assert said in out[1].reason


def test_a_piece_over_its_size_is_refused() -> None:
    big = bytes(p.PIECE_BYTES + 1)
    wire = encode_frame(p.AttachFrame(offer(big)))
    wire += encode_frame(p.FilePieceFrame(base64.b64encode(big).decode()))
    out, _ = read_all(wire)
    assert out[1] == BadFrame(f"a file_piece holds 1 to {p.PIECE_BYTES} bytes here, not {len(big)}")


def test_a_piece_before_any_attach_is_refused() -> None:
    out, _ = read_all(pieces(b"abc")[0])
    assert isinstance(out[0], BadFrame)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"name": "../etc/passwd"}, "without '/'"),
        ({"name": "a\nb"}, "newlines"),
        ({"name": ""}, "1 to 255"),
        ({"media_type": "Text/Plain"}, "lowercase"),
        ({"media_type": "text"}, "media type"),
        ({"size": -1}, "at least 0"),
        ({"sha256": "ab" * 31}, "SHA-256"),
    ],
)
def test_an_offer_names_a_file_and_nothing_else(fields: dict[str, object], said: str) -> None:
    good = {"name": "a.txt", "media_type": "text/plain", "size": 3, "sha256": "a" * 64}
    with pytest.raises(p.DecodeError, match=said):
        p.structure({**good, **fields}, p.FileOffer)


def test_a_message_that_steers_a_turn_carries_no_files() -> None:
    with pytest.raises(p.InvalidValue, match="carries no files"):
        p.TurnFrame(p.SessionId("s1"), "x", True, break_=p.Break.SOFT, files=(offer(),))


def test_a_user_record_names_its_files_and_old_ones_read_the_same() -> None:
    time = p.Timestamp.parse("2026-12-06T10:00:00.000000Z")
    plain = p.UserRecord(time, "hi")
    assert b"files" not in p.dumps(plain)
    assert b"attached" not in p.dumps(plain)
    file = p.TurnFile("a.pdf", "application/pdf", 10, "b" * 64, text="c" * 64)
    record = p.UserRecord(time, "hi", files=(file,), attached="--- the text ---")
    assert p.loads(p.LogRecord, p.dumps(record)) == record  # type: ignore[arg-type]


def test_an_image_goes_as_a_typed_part_after_the_text() -> None:
    image = p.ImagePart("image/png", "d" * 64, data="iVBORw0KGgo=")
    message = p.UserMessage("What is this?", images=(image,))
    expected = (
        b'[{"role":"user","content":[{"type":"text","text":"What is this?"},'
        b'{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]'
    )
    assert encode_messages([message]) == expected
    assert encode_messages([p.UserMessage("plain")]) == b'[{"role":"user","content":"plain"}]'
    named = p.UserMessage("x", images=(p.ImagePart("image/png", "d" * 64),))
    assert b'"url":"data:image/png;sha256,' + b"d" * 64 + b'"' in encode_messages([named])
    request = p.ChatRequest("main", (named,), ())  # a name measures and compares; never sent
    with pytest.raises(ValueError, match="no bytes filled in"):
        encode_request(request, 0, InferenceConfig())
    with pytest.raises(ValueError, match="no bytes filled in"):
        request_body(request, 0, InferenceConfig())
