"""A session's rules, without I/O: the baseline, the log's lines, and replay (SPEC section 5).
The files are `boxmaker.store`'s."""

from .baseline import (
    assemble_baseline,
    baseline_bytes,
    check_budget,
    parse_baseline,
    sha256_hex,
)
from .errors import (
    BaselineMismatch,
    BaselineTooLarge,
    LogChanged,
    NoSuchSession,
    SessionError,
    SessionExists,
    StorageError,
    TornLog,
    Untrusted,
    os_reason,
)
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

__all__ = [
    "INTERRUPTED",
    "BaselineMismatch",
    "BaselineTooLarge",
    "LogChanged",
    "NoSuchSession",
    "SessionError",
    "SessionExists",
    "StorageError",
    "TornLog",
    "Untrusted",
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
    "os_reason",
    "parse_baseline",
    "parse_log",
    "request_messages",
    "sha256_hex",
]
