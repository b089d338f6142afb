"""What the daemons share: the socket and its accept loop, the pid lock, the self-test's
checks of the home, signals and the start-up, peer credentials, the client of
`broker.sock`, and a blocking call off the event loop."""

from .broker_port import BrokerDown, BrokerPort
from .checks import Check, Checks, own_home, writable
from .daemons import (
    STOP,
    AcceptPaused,
    daemon_parser,
    listen,
    on_signals,
    released,
    run_daemon,
    setup_logging,
)
from .listener import AlreadyServing, SocketServer, UnixListener, open_unix_listener
from .lock import Locked, PidLock, take_lock
from .peers import peer_uid, socket_owner_problem, trusted
from .worker import blocking

__all__ = [
    "STOP",
    "AcceptPaused",
    "AlreadyServing",
    "BrokerDown",
    "BrokerPort",
    "Check",
    "Checks",
    "Locked",
    "PidLock",
    "SocketServer",
    "UnixListener",
    "blocking",
    "daemon_parser",
    "listen",
    "on_signals",
    "open_unix_listener",
    "own_home",
    "peer_uid",
    "released",
    "run_daemon",
    "setup_logging",
    "socket_owner_problem",
    "take_lock",
    "trusted",
    "writable",
]
