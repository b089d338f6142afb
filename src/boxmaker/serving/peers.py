"""Who is at the other end of a Unix socket: each side of `loop.sock` and `broker.sock` talks
only to its own user (or root), as the kernel tells it (`SO_PEERCRED`, where the system has
it), and only through a socket file that user owns."""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

import trio

__all__ = ["peer_uid", "socket_owner_problem", "trusted"]


def trusted(uid: int) -> bool:
    """This process's own user, or root."""
    return uid in (os.geteuid(), 0)


def peer_uid(sock: trio.socket.SocketType) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (None where the
    system cannot tell)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


def socket_owner_problem(path: Path) -> str | None:
    """What is wrong with the socket file at `path` (where it leads), else None: not a socket,
    or another user's. Nothing there is no problem here (connecting says so)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket"
    if not trusted(st.st_uid):
        return f"{path}: the socket belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    return None
