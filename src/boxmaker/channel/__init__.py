"""The channel protocol on `loop.sock` (SPEC section 7): the frame codec, the server, the client."""

from .client import Channel, ChannelError, open_channel
from .codec import END, MAX_FRAME, NEED_DATA, BadFrame, FrameDecoder, encode_frame
from .server import AlreadyServing, ChannelServer, handle_connection, open_unix_listener

__all__ = [
    "END",
    "MAX_FRAME",
    "NEED_DATA",
    "AlreadyServing",
    "BadFrame",
    "Channel",
    "ChannelError",
    "ChannelServer",
    "FrameDecoder",
    "encode_frame",
    "handle_connection",
    "open_channel",
    "open_unix_listener",
]
