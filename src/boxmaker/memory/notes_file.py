"""`<home>/memory/notes.jsonl`: the notes, one record a line, append only and hash-chained
(`store.ChainedFile`; line 1's `prev` is `GENESIS`), so a changed, removed or reordered line is
found, naming it. Two processes write it, brokerd (`remember`, `forget`) and `bxctl memory`
(`add`, `rm`), each append under the file's lock. Blocking calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from .. import layout
from ..proto import NotesRecord
from ..session import DEFAULT_TOKENS_PER_BYTE, Exposed, Link, StorageError
from ..store import Chain, ChainedFile, FileSystem, MemoryText, core_only, parse_chained
from .errors import NotesDamaged
from .notes import Notes, baseline_memory

__all__ = ["GENESIS", "NotesFile", "memory_reader", "memory_text", "parse_notes"]

GENESIS = hashlib.sha256(b"boxmaker notes").hexdigest()  # what line 1 of the chain follows
NOTES: Chain[NotesRecord] = Chain(NotesRecord, "note", GENESIS, NotesDamaged)  # type: ignore[arg-type]

Decide = Callable[[Notes], "NotesRecord | str"]


def parse_notes(
    data: bytes, path: Path, after: Link | None = None
) -> tuple[list[NotesRecord], Link, int]:
    """The records of the whole lines of `data`, where their chain ends, and the offset where
    the whole lines end (`store.parse_chained`).

    Raises:
        NotesDamaged: naming the line that is not a chained note record.
    """
    return parse_chained(data, path, NOTES, after)


class NotesFile:
    """The notes of one home."""

    def __init__(self, home: Path, fs: FileSystem | None = None) -> None:
        self.file = ChainedFile(layout.notes_file(home), NOTES, fs)
        self.path, self.folder = self.file.path, self.file.folder

    def read(self) -> Notes:
        """The notes as their whole lines say (none when there is no file).

        Raises:
            NotesDamaged: a line is not a chained note record.
            Exposed: the file or its folder is a link, or not this user's alone.
            StorageError: the file cannot be read.
        """
        return Notes(self.file.read())

    def append(self, decide: Decide) -> NotesRecord | str:
        """Under the file's lock, append the record `decide` makes of the notes as they are
        (or write nothing, returning what it said instead); the record once durable.

        Raises:
            NotesDamaged: a line is not a chained note record; nothing is written.
            Exposed, StorageError: as `read`; a failed write is taken back out.
        """
        return self.file.append(lambda records: decide(Notes(records)))


def memory_text(home: Path, pinned_budget: int) -> tuple[str, str | None]:
    """The memory part of a baseline made now: `core.md`, then the pinned notes within
    `pinned_budget` characters (`notes.baseline_memory`); and, when the notes could not be
    read, why (they are then left out: a damaged notes file must not stop a conversation).

    Raises:
        Exposed: `core.md` or the memory folder is not this user's alone, or a link.
        StorageError: `core.md` cannot be read, or is not UTF-8.
    """
    text = core_only(home)()
    problem = None
    try:
        read = NotesFile(home).read()
    except (NotesDamaged, StorageError, Exposed) as error:
        read, problem = Notes(), str(error)
    return baseline_memory(text, read, pinned_budget), problem


def memory_reader(home: Path, pinned_tokens: int, warn: Callable[[str], None]) -> MemoryText:
    """What a store asks for the memory of each baseline it makes (`store.MemoryText`): the
    pinned notes within `pinned_tokens` (estimated at `DEFAULT_TOKENS_PER_BYTE`); `warn` is
    told when the notes were left out."""
    budget = int(pinned_tokens / DEFAULT_TOKENS_PER_BYTE)

    def memory() -> str:
        text, problem = memory_text(home, budget)
        if problem is not None:
            warn(f"the pinned notes are left out of the new baseline: {problem}")
        return text

    return memory
