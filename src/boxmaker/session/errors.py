"""The session store's errors: what a caller can act on, with the file and line when there is one.

    SessionError
     ├── NoSuchSession(session)
     ├── SessionExists(session)
     ├── TornLog(path, line, reason)       a line of the log is not a complete, known record
     │    └── ChainBroken(path, line, problem, reason)   a line breaks the hash chain
     ├── BaselineMismatch(path, recorded, actual)
     ├── BaselineTooLarge(tokens, max_tokens)
     ├── StorageError(path, reason)         the disk refused (full, read-only, ...)
     ├── Exposed(path, reason)              not loopd's user's, writable by others, or a link
     └── LogChanged(path, what)             the open log was replaced, removed or resized

Nothing above `store/` sees an `OSError` it cannot act on: the store makes each a
`StorageError` naming the file, in one place (`store.storage_errors`).
"""

from __future__ import annotations

from pathlib import Path

from ..proto import SessionId

__all__ = [
    "BaselineMismatch",
    "BaselineTooLarge",
    "ChainBroken",
    "Exposed",
    "LogChanged",
    "NoSuchSession",
    "SessionError",
    "SessionExists",
    "StorageError",
    "TornLog",
]


class SessionError(Exception):
    """A session cannot be created, resumed or written; `str(error)` says why."""


class NoSuchSession(SessionError):
    def __init__(self, session: SessionId) -> None:
        self.session = session
        super().__init__(f"no session {session}")


class SessionExists(SessionError):
    def __init__(self, session: SessionId) -> None:
        self.session = session
        super().__init__(f"session {session} already exists")


class TornLog(SessionError):
    def __init__(self, path: Path, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(f"{path}, line {line}: {reason}; the log is not changed")


class ChainBroken(TornLog):
    """A line breaks the log's hash chain: `problem` is `hash_mismatch`, `prev_mismatch` or
    `seq_gap` (`session/chain.py`)."""

    def __init__(self, path: Path, line: int, problem: str, reason: str) -> None:
        self.problem = problem
        super().__init__(path, line, f"{problem}: {reason}")


class BaselineMismatch(SessionError):
    def __init__(self, path: Path, recorded: str, actual: str) -> None:
        self.path = path
        self.recorded = recorded
        self.actual = actual
        super().__init__(
            f"{path} has sha256 {actual} but session_start records {recorded}; "
            "the baseline was changed on disk"
        )


class BaselineTooLarge(SessionError):
    def __init__(self, tokens: int, max_tokens: int) -> None:
        self.tokens = tokens
        self.max_tokens = max_tokens
        super().__init__(
            f"the baseline is {tokens} tokens, over the budget of {max_tokens} "
            "([baseline] max_tokens); shorten system.md or memory/core.md"
        )


class StorageError(SessionError):
    def __init__(self, path: Path, reason: str, *, reading: bool = False) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot {'read' if reading else 'write'} {path}: {reason}")


class Exposed(SessionError):
    """A file or folder loopd will not use: another user could have written what is in it
    (its ownership, said apart from the `untrusted` of a tool result, which is taint)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"{path} {reason}; loopd uses only files and folders its own user owns and no one "
            "else can write (fix the owner or mode, or point loopd elsewhere)"
        )


class LogChanged(SessionError):
    """The log of an open session is no longer the file loopd wrote (an editor saved over it,
    it was removed or truncated): appending would lose turns or write after a cut."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(
            f"{path} {what} while the session was open; nothing was appended, and the next "
            "turn reads the session from disk again"
        )
