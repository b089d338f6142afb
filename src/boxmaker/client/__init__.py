"""A channel's side of `loop.sock` (docs/protocol.md): connecting once the socket is known to be
its user's, sending frames and reading them back (`connection`), and the requests answered by
one frame (`requests`). `bxctl` and `gatewayd` are its channels."""

from .connection import FINISH_S, Channel, ChannelError, open_channel
from .requests import ask, attach, offer_of

__all__ = ["FINISH_S", "Channel", "ChannelError", "ask", "attach", "offer_of", "open_channel"]
