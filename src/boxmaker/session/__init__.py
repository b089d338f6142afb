"""Sessions on disk: the store, the baseline, replay and resume (SPEC section 5)."""

from .baseline import (
    CALL_TOOL,
    CLOCK,
    CORE_TOOLS,
    FIND_TOOL,
    assemble_baseline,
    baseline_bytes,
    check_budget,
    parse_baseline,
    sha256_hex,
)
from .errors import (
    BaselineMismatch,
    BaselineTooLarge,
    NoSuchSession,
    SessionError,
    SessionExists,
    StorageError,
    TornLog,
)
from .fs import FileSystem
from .log import finished_writes, parse_log
from .replay import (
    INTERRUPTED,
    dangling_calls,
    healing_records,
    last_usage,
    message_of,
    messages,
    next_call,
    request_messages,
)
from .session import Session
from .store import BASELINE_FILE, LOG_FILE, SetAside, Store, read_baseline

__all__ = [
    "BASELINE_FILE",
    "CALL_TOOL",
    "CLOCK",
    "CORE_TOOLS",
    "FIND_TOOL",
    "INTERRUPTED",
    "LOG_FILE",
    "BaselineMismatch",
    "BaselineTooLarge",
    "FileSystem",
    "NoSuchSession",
    "Session",
    "SessionError",
    "SessionExists",
    "SetAside",
    "StorageError",
    "Store",
    "TornLog",
    "assemble_baseline",
    "baseline_bytes",
    "check_budget",
    "dangling_calls",
    "finished_writes",
    "healing_records",
    "last_usage",
    "message_of",
    "messages",
    "next_call",
    "parse_baseline",
    "parse_log",
    "read_baseline",
    "request_messages",
    "sha256_hex",
]
