"""The channel protocol on `loop.sock` (SPEC section 7), sans-IO: the frame codec and the
rules of a connection. loopd's side of the socket is `boxmaker.loopd.serve`; bxctl's client
is `boxmaker.cli.channel`."""

from .codec import (
    END,
    MAX_FRAME,
    MORE_AFTER_TURN,
    NEED_DATA,
    BadFrame,
    FrameDecoder,
    LoopdConnection,
    Request,
    Sending,
    encode_frame,
    split_frame,
)

__all__ = [
    "END",
    "MAX_FRAME",
    "MORE_AFTER_TURN",
    "NEED_DATA",
    "BadFrame",
    "FrameDecoder",
    "LoopdConnection",
    "Request",
    "Sending",
    "encode_frame",
    "split_frame",
]
