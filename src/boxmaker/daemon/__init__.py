"""loopd's service: the turn of each connection (`service`), the `loop.sock` server
(`serve`) and the self-test before it starts (`selftest`), SPEC sections 7 and 8."""

from .selftest import Check, SelfTest, self_test
from .serve import AlreadyServing, ChannelServer, handle_connection, open_unix_listener
from .service import Daemon, Deliver, session_cache_size

__all__ = [
    "AlreadyServing",
    "ChannelServer",
    "Check",
    "Daemon",
    "Deliver",
    "SelfTest",
    "handle_connection",
    "open_unix_listener",
    "self_test",
    "session_cache_size",
]
