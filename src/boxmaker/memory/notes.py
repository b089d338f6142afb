"""The notes, as their file's records give them, and the memory a new baseline holds. Pure.

`Notes` folds the lines of `notes.jsonl` (`note`, `forget`) into what holds now: the notes not
withdrawn, in the order made, and the next id. `remembered` and `withdrawn` decide what a
`remember` or a `forget` writes (or why it writes nothing). `baseline_memory` is the memory
part of a baseline being made (SPEC section 17): `core.md`, then the pinned notes as they are
then, within a budget: the newest pins first, since a later pin is the owner's later word;
those left out are said to be there, and `recall` finds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from attrs import frozen

from ..proto import ForgetRecord, NoteRecord, NotesRecord, SessionId, Timestamp

__all__ = [
    "MAX_NOTE",
    "PINNED_HEADING",
    "Notes",
    "baseline_memory",
    "pinned_lines",
    "remembered",
    "withdrawn",
]

MAX_NOTE = 2000  # characters of one note: a fact or a preference, not a document
PINNED_HEADING = "Pinned notes (kept with remember; forget withdraws one by its id):"


@frozen(eq=False)
class Notes:
    """The records of `notes.jsonl`, oldest first, and what they say now."""

    records: tuple[NotesRecord, ...] = ()

    @cached_property
    def live(self) -> dict[str, NoteRecord]:
        """The notes not withdrawn, by id, in the order they were made."""
        notes: dict[str, NoteRecord] = {}
        for record in self.records:
            if isinstance(record, NoteRecord):
                notes[record.id] = record
            else:
                notes.pop(record.id, None)
        return notes

    @cached_property
    def next_id(self) -> str:
        made = [int(r.id[1:]) for r in self.records if isinstance(r, NoteRecord)]
        return f"n{max(made, default=0) + 1}"

    def pinned(self) -> list[NoteRecord]:
        """The notes every new baseline holds: pinned, and never a secret one."""
        return [note for note in self.live.values() if note.pin and not note.secret]

    def made(self, id: str) -> NoteRecord | None:
        """The note `id` as it was made, withdrawn or not."""
        return next((r for r in self.records if isinstance(r, NoteRecord) and r.id == id), None)


def remembered(
    notes: Notes,
    text: str,
    pin: bool,
    now: Timestamp,
    *,
    session: SessionId | None = None,
    turn: int | None = None,
    untrusted: bool = False,
    secret: bool = False,
) -> NoteRecord | str:
    """The note a `remember` writes, or why it writes none (a sentence for the model). Made
    while its conversation holds an untrusted result (`untrusted`) or a secret, a note is not
    pinned: it would join every new conversation's system prompt."""
    text = text.strip()
    if not text:
        return "Nothing was kept: the note is empty."
    if pin and (untrusted or secret):
        held = (
            "a secret"
            if secret
            else "an untrusted result (words a tool gave, which may be planted)"
        )
        return (
            f"Nothing was kept: a note cannot be pinned while the conversation holds {held}, "
            "since a pinned note joins every new conversation's system prompt. Remember it "
            "without pin: recall finds it."
        )
    if len(text) > MAX_NOTE:
        return (
            f"Nothing was kept: a note is at most {MAX_NOTE:,} characters, this one "
            f"{len(text):,}. Keep the fact itself, in a sentence or two."
        )
    if "\x00" in text:
        return "Nothing was kept: the note holds a NUL character."
    return NoteRecord(now, notes.next_id, text, pin, session, turn, untrusted, secret)


def withdrawn(
    notes: Notes,
    id: str,
    now: Timestamp,
    *,
    session: SessionId | None = None,
    turn: int | None = None,
) -> ForgetRecord | str:
    """The withdrawal a `forget` writes, or why it writes none."""
    if id in notes.live:
        return ForgetRecord(now, id, session, turn)
    if notes.made(id) is not None:
        return f"Note {id} was withdrawn already."
    return f"There is no note {id}."


def pinned_lines(pinned: Sequence[NoteRecord], budget: int) -> list[str]:
    """The lines of the pinned notes that fit in `budget` characters together, newest first
    kept, in the order made; then a line saying how many were left out, if any."""
    kept: list[NoteRecord] = []
    used = 0
    for note in reversed(pinned):
        line = _line(note)
        if used + len(line) + 1 > budget:
            continue  # an older, shorter one may still fit
        kept.append(note)
        used += len(line) + 1
    lines = [_line(note) for note in reversed(kept)]
    if left := len(pinned) - len(kept):
        lines.append(f"({left} more pinned notes did not fit here: recall finds them.)")
    return lines


def _line(note: NoteRecord) -> str:
    mark = ", from a tool's words" if note.untrusted else ""
    return f"- [{note.id}{mark}] " + " ".join(note.text.split())


def baseline_memory(core: str | None, notes: Notes, budget: int) -> str:
    """The memory part of a baseline made now: `core.md`'s text (trailing newlines dropped),
    then a blank line and the pinned notes within `budget` characters; "" for neither."""
    parts = []
    if core is not None and core.strip():
        parts.append(core.rstrip("\n"))
    if pinned := notes.pinned():
        parts.append("\n".join([PINNED_HEADING, *pinned_lines(pinned, budget)]))
    return "\n\n".join(parts)
