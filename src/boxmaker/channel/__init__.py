"""The channel protocol on `loop.sock` (SPEC section 7): the frame codec and the channel client.
loopd's side of the socket is `boxmaker.daemon.serve`."""

from .client import Channel, ChannelError, open_channel
from .codec import END, MAX_FRAME, NEED_DATA, BadFrame, FrameDecoder, encode_frame, split_frame

__all__ = [
    "END",
    "MAX_FRAME",
    "NEED_DATA",
    "BadFrame",
    "Channel",
    "ChannelError",
    "FrameDecoder",
    "encode_frame",
    "open_channel",
    "split_frame",
]
