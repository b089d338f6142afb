"""The channel protocol on `loop.sock` (SPEC section 7), sans-IO: the frame codec and the
rules of a connection (loopd's side of the socket is `boxmaker.loopd.serve`; bxctl's client
is `boxmaker.cli.channel`); and `broker.sock`'s rules on the same codec (`broker_codec`)."""

from .broker_codec import BrokerClient, BrokerdConnection, BrokerRequest, Wrong, fitted
from .codec import (
    END,
    MAX_FRAME,
    MORE_AFTER_TURN,
    NEED_DATA,
    BadFrame,
    FrameDecoder,
    LoopdConnection,
    Piece,
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
    "BrokerClient",
    "BrokerRequest",
    "BrokerdConnection",
    "FrameDecoder",
    "LoopdConnection",
    "Piece",
    "Request",
    "Sending",
    "Wrong",
    "encode_frame",
    "fitted",
    "split_frame",
]
