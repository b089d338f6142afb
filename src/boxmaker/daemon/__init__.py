"""loopd's service: the turn of each connection (`service`), the `loop.sock` server
(`serve`) and its socket (`listener`), the self-test before it starts (`selftest`) and the
locks that keep it alone on its home and socket (`lock`), SPEC sections 7 and 8."""

from .listener import AlreadyServing, SocketServer, UnixListener, open_unix_listener
from .lock import Locked, PidLock, take_lock
from .selftest import LOCK_FILE, Check, SelfTest, own_home, self_test
from .serve import MAX_QUEUED, ChannelServer, handle_connection
from .service import Daemon, Deliver, memory_of, session_cache_size

__all__ = [
    "LOCK_FILE",
    "MAX_QUEUED",
    "AlreadyServing",
    "ChannelServer",
    "Check",
    "Daemon",
    "Deliver",
    "Locked",
    "PidLock",
    "SelfTest",
    "SocketServer",
    "UnixListener",
    "handle_connection",
    "memory_of",
    "open_unix_listener",
    "own_home",
    "self_test",
    "session_cache_size",
    "take_lock",
]
