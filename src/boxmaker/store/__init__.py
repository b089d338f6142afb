"""Sessions on disk, in blocking calls (the daemon makes the thread hops): the store (create,
resume, sweep), a session open for its turns (append, sync, cut back, a new epoch), its log
(`Journal`), files put in place whole (`staging`), the file operations beneath them (SPEC
section 5), what loopd trusts on disk (`trust`), and the sessions as bxctl reads them with no
loopd (`offline`). The pure rules they follow are in `boxmaker.session`; the names on disk in
`boxmaker.layout`."""

from .chained import Chain, ChainedFile, parse_chained
from .fork import CannotFork, Forked, fork_session
from .fs import FileSystem, storage_errors
from .identity import identity_of
from .journal import Journal
from .offline import (
    InTurn,
    Listed,
    check_epochs,
    current_epoch,
    entries,
    entry,
    epoch_views,
    held_for_removal,
    log_path,
    remove_session,
    session_folders,
)
from .open_session import OpenSession, SetAside
from .origins import ORIGINS, OriginIndex
from .store import MemoryText, Store, core_only, read_baseline, read_text
from .trust import exposure, open_checked, problems_at_start
from .uploads import (
    Upload,
    UploadsFull,
    clear_uploads,
    keep_upload,
    keep_upload_text,
    read_upload,
)

__all__ = [
    "ORIGINS",
    "CannotFork",
    "Chain",
    "ChainedFile",
    "FileSystem",
    "Forked",
    "InTurn",
    "Journal",
    "Listed",
    "MemoryText",
    "OpenSession",
    "OriginIndex",
    "SetAside",
    "Store",
    "Upload",
    "UploadsFull",
    "check_epochs",
    "clear_uploads",
    "core_only",
    "current_epoch",
    "entries",
    "entry",
    "epoch_views",
    "exposure",
    "fork_session",
    "held_for_removal",
    "identity_of",
    "keep_upload",
    "keep_upload_text",
    "log_path",
    "open_checked",
    "parse_chained",
    "problems_at_start",
    "read_baseline",
    "read_text",
    "read_upload",
    "remove_session",
    "session_folders",
    "storage_errors",
]
