"""Memory's errors. A file that cannot be read or written, or that another user could have
written, is the store's `StorageError` or `Exposed` (each names the file); what is memory's
own:

    SessionError
     └── NotesDamaged(path, line, reason)   a line of notes.jsonl is not a whole, chained note
"""

from __future__ import annotations

from pathlib import Path

from ..session import SessionError

__all__ = ["NotesDamaged"]


class NotesDamaged(SessionError):
    def __init__(self, path: Path, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(
            f"{path}, line {line}: {reason}; the notes are not changed, and no note is kept "
            "until the file is mended (bxctl memory ls says the same)"
        )
