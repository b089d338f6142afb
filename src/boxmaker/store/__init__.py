"""Sessions on disk: the store (create, resume, sweep), the open session's log (append), the
file operations beneath them (SPEC section 5), and what loopd trusts on disk (`trust`). The
pure rules they follow are in `boxmaker.session`."""

from .fs import FileSystem
from .session import INDEX_FILE, Session, SetAside
from .store import BASELINE_FILE, LOG_FILE, Store, read_baseline
from .trust import open_checked, problem, problems_at_start

__all__ = [
    "BASELINE_FILE",
    "INDEX_FILE",
    "LOG_FILE",
    "FileSystem",
    "Session",
    "SetAside",
    "Store",
    "open_checked",
    "problem",
    "problems_at_start",
    "read_baseline",
]
