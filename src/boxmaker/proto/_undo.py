"""Undo and modes (SPEC section 21): the records a session keeps of the owner's acts between
turns, and the frames that ask for them on both sockets.

A `mode` record says the session's mode changed; an `undo` record what an undo restored and
who asked. Both are written by loopd between turns (never inside one), and give the model no
message of their own: the next turn's `user` record tells the model what was undone (its
`note`), after the owner's words, so no earlier byte of a request changes.

An undo is two requests, each answered by one final frame: `undo` without `confirm` is
answered with `undo_preview` (what would change, the changes nobody recorded that stand in
the way, and a token naming that preview); `undo` with the token restores it, and is
answered `undone`, or refused when anything changed since the preview. loopd passes both to
brokerd, which owns the roots, and writes the `undo` record itself.
"""

from __future__ import annotations

from attrs import field, frozen

from ._ids import SessionId, Timestamp
from ._tools import Mode

__all__ = [
    "ModeFrame",
    "ModeRecord",
    "ModeSetFrame",
    "UndoChange",
    "UndoFrame",
    "UndoPreviewFrame",
    "UndoRecord",
    "UndoneFrame",
]

_OMIT = {"omit_if_default": True}


@frozen
class ModeRecord:
    """The session's mode from here on; `by` names who set it (the channel's word)."""

    time: Timestamp
    mode: Mode
    by: str = field(default="owner", metadata=_OMIT)


@frozen
class UndoRecord:
    """An undo done: the turn (or call) from which the session's changes were taken back
    (`from_turn`, `from_call`); the paths restored (the first 100; `more` counts the rest), as the
    model writes them; `force`: changes made since by others were overwritten."""

    time: Timestamp
    restored: tuple[str, ...]
    from_turn: int | None = field(default=None, metadata=_OMIT)
    from_call: int | None = field(default=None, metadata=_OMIT)
    more: int = field(default=0, metadata=_OMIT)
    force: bool = field(default=False, metadata=_OMIT)
    by: str = field(default="owner", metadata=_OMIT)


@frozen
class ModeFrame:
    """To loopd: set `session`'s mode (between turns; a `mode_set` answers it); without
    `mode`, only ask which it is."""

    session: SessionId
    mode: Mode | None = field(default=None, metadata=_OMIT)
    by: str = field(default="owner", metadata=_OMIT)


@frozen
class ModeSetFrame:
    """The session's mode is now `mode` (it was `was`)."""

    session: SessionId
    mode: Mode
    was: Mode


@frozen
class UndoFrame:
    """Undo `session`'s changes from `turn` (or from `call`) on. Without `confirm` it asks
    for the preview; with the preview's token it restores what the preview showed. `force`
    overwrites what others changed since. `identity` is the session's, filled in by loopd
    for brokerd (a channel leaves it out); `by` names who asked."""

    session: SessionId
    turn: int | None = field(default=None, metadata=_OMIT)
    call: int | None = field(default=None, metadata=_OMIT)
    force: bool = field(default=False, metadata=_OMIT)
    confirm: str = field(default="", metadata=_OMIT)
    identity: str = field(default="", metadata=_OMIT)
    by: str = field(default="owner", metadata=_OMIT)


@frozen
class UndoChange:
    """One path an undo changes (`action`: what it does to it), or one in its way (`action`:
    why); `diff`, for a text file, the change as a unified diff (bounded)."""

    path: str
    action: str
    diff: str = field(default="", metadata=_OMIT)


@frozen
class UndoPreviewFrame:
    """What the undo would do: `changes`, and `conflicts` (changes made since by others: the
    undo stops on them unless forced); `token` names this preview for the confirm; `notes`
    say what it cannot restore (a root with no checkpoints, checkpoints no longer kept)."""

    session: SessionId
    changes: tuple[UndoChange, ...]
    conflicts: tuple[UndoChange, ...] = field(default=(), metadata=_OMIT)
    token: str = ""
    notes: tuple[str, ...] = field(default=(), metadata=_OMIT)


@frozen
class UndoneFrame:
    """The undo is done: the paths restored (the first 100; `more` counts the rest)."""

    session: SessionId
    restored: tuple[str, ...]
    more: int = field(default=0, metadata=_OMIT)
