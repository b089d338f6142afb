"""A session's rules, without I/O: the baseline, the log's lines, and replay (SPEC section 5).
The files are `boxmaker.store`'s."""

from .baseline import (
    assemble_baseline,
    baseline_bytes,
    check_budget,
    parse_baseline,
    sha256_hex,
)
from .chain import NO_LINK, ChainProblem, Link, problem, seal
from .errors import (
    BaselineMismatch,
    BaselineTooLarge,
    ChainBroken,
    LogChanged,
    NoSuchSession,
    SessionError,
    SessionExists,
    StorageError,
    TornLog,
    Untrusted,
    os_reason,
)
from .index import Index, first_words, index_of
from .log import Log, finished_writes, parse_log, session_start
from .replay import (
    INTERRUPTED,
    dangling_calls,
    healing_records,
    last_usage,
    message_of,
    messages,
    next_call,
    request_messages,
    starts_turn,
    turn_end,
    unended_turn,
)
from .verify import Problem, check_log
from .view import Taken, ToolStep, Turn, turns_of

__all__ = [
    "INTERRUPTED",
    "NO_LINK",
    "BaselineMismatch",
    "BaselineTooLarge",
    "ChainBroken",
    "ChainProblem",
    "Index",
    "Link",
    "Log",
    "LogChanged",
    "NoSuchSession",
    "Problem",
    "SessionError",
    "SessionExists",
    "StorageError",
    "Taken",
    "ToolStep",
    "TornLog",
    "Turn",
    "Untrusted",
    "assemble_baseline",
    "baseline_bytes",
    "check_budget",
    "check_log",
    "dangling_calls",
    "finished_writes",
    "first_words",
    "healing_records",
    "index_of",
    "last_usage",
    "message_of",
    "messages",
    "next_call",
    "os_reason",
    "parse_baseline",
    "parse_log",
    "problem",
    "request_messages",
    "seal",
    "session_start",
    "sha256_hex",
    "starts_turn",
    "turn_end",
    "turns_of",
    "unended_turn",
]
