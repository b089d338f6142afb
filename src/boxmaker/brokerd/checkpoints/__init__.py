"""Checkpoints and undo (the blocking core, no trio): before and after each tool call that
may change a root, brokerd takes a `snapshot` of it (a `Manifest`, the bytes in `Objects`)
and records the pair in the `Book`; an undo `select`s where to go back to, `plan_restore`
decides what to put back and what stands in the way, and `restore` does it.

    manifest.py   what a root holds, as a value; its canonical bytes; a diff for a person
    plan.py       the one decision of an undo: the actions, the conflicts, the token
    snapshot.py   the race-free walk that makes a manifest, with its stat cache
    objects.py    the content-addressed store of blobs
    book.py       the record of checkpoints, bounded by `keep_bytes`, and `select`
    restore.py    carrying out a plan, never through a link
"""

from .book import Book, Checkpoint, Selection
from .errors import CheckpointError, RestoreStopped
from .manifest import (
    Entry,
    Manifest,
    changed,
    decode,
    diff_text,
    encode,
    manifest_id,
    shown_path,
)
from .objects import Objects
from .plan import Action, Conflict, Plan, Step, plan_restore
from .restore import restore
from .snapshot import OverBounds, StatCache, snapshot

__all__ = [
    "Action",
    "Book",
    "Checkpoint",
    "CheckpointError",
    "Conflict",
    "Entry",
    "Manifest",
    "Objects",
    "OverBounds",
    "Plan",
    "RestoreStopped",
    "Selection",
    "StatCache",
    "Step",
    "changed",
    "decode",
    "diff_text",
    "encode",
    "manifest_id",
    "plan_restore",
    "restore",
    "shown_path",
    "snapshot",
]
