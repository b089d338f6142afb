"""The lines of `<home>/memory/notes.jsonl`: the notes the agent and its owner keep (SPEC
section 17). Append only, hash-chained as a session's log is: a note is never changed, and a
withdrawal (`forget`) is a line of its own, so nothing is ever rewritten.
"""

from __future__ import annotations

import re

from attrs import Attribute, field, frozen

from ._ids import InvalidValue, SessionId, Timestamp

__all__ = ["ForgetRecord", "NoteRecord", "NotesRecord", "check_note_id"]

_OMIT = {"omit_if_default": True}
_NOTE_ID = re.compile(r"n[1-9][0-9]{0,17}")


def check_note_id(_instance: object, attribute: Attribute[str], value: str) -> None:
    if type(value) is not str or not _NOTE_ID.fullmatch(value):
        raise InvalidValue(f"{value!r} is not a note id (n1, n2, ...)", attribute.name)


@frozen
class NoteRecord:
    """A note kept: its id (`n<number>`, in the order made), its text, whether it is pinned
    (it joins every baseline made from now on: a new session's, a new epoch's), where it came
    from (the session and turn of the `remember` call; neither for the owner's own, from
    `bxctl memory add`), `untrusted` when it was made while that conversation held an
    untrusted result (the owner approved it, but its words may be a tool's), and `secret` when
    it held a secret (it is then never recalled, nor pinned)."""

    time: Timestamp
    id: str = field(validator=check_note_id)
    text: str
    pin: bool
    session: SessionId | None = field(default=None, metadata=_OMIT)
    turn: int | None = field(default=None, metadata=_OMIT)
    untrusted: bool = field(default=False, metadata=_OMIT)
    secret: bool = field(default=False, metadata=_OMIT)


@frozen
class ForgetRecord:
    """A note withdrawn (`forget`, or `bxctl memory rm`): it is no longer recalled nor pinned;
    its line stays."""

    time: Timestamp
    id: str = field(validator=check_note_id)
    session: SessionId | None = field(default=None, metadata=_OMIT)
    turn: int | None = field(default=None, metadata=_OMIT)


NotesRecord = NoteRecord | ForgetRecord
