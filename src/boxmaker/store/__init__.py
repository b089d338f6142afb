"""Sessions on disk: the store (create, resume, sweep), the open session's log (append), and
the file operations beneath them (SPEC section 5). The pure rules they follow are in
`boxmaker.session`."""

from .fs import FileSystem
from .session import INDEX_FILE, Session, SetAside
from .store import BASELINE_FILE, LOG_FILE, Store, read_baseline

__all__ = [
    "BASELINE_FILE",
    "INDEX_FILE",
    "LOG_FILE",
    "FileSystem",
    "Session",
    "SetAside",
    "Store",
    "read_baseline",
]
