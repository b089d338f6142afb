"""The one decision of an undo (`plan_restore`): from the recorded calls since a checkpoint,
which paths to put back and how (`Action`s), and which stand in the way (`Conflict`s). No
I/O: the manifests come from `snapshot.py` and `book.py`, the plan is carried out by
`restore.py`.

Strategy: an undo touches only what the session's own calls changed. Each recorded call (a
`Step`) holds the manifests before and after it; the paths ours changed are *touched*, and
only those are put back. A touched path someone else changed since (in another session's
call, or between two calls, seen as a difference from one manifest to the next) is a
conflict: the owner's edit is never overwritten unless asked (`force`). Everything else in
the root, however it changed, is left alone. What cannot be done whole (a folder to remove
that holds files made since, a file whose folder is gone) is a conflict that `force` does
not override: it is left out, and the rest goes ahead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from attrs import evolve, frozen

from .manifest import Entry, Manifest, changed, manifest_id, parts_of

__all__ = ["VERBS", "Action", "Conflict", "Plan", "Step", "plan_restore"]

VERBS = ("remove", "mkdir", "write", "link", "chmod", "chown")
_MAKE = {"dir": "mkdir", "file": "write", "link": "link"}


@frozen
class Step:
    """One recorded call on the root: its manifests `before` and `after`; `ours`, made by
    the session whose changes are undone."""

    before: Manifest
    after: Manifest
    ours: bool


@frozen
class Action:
    """One thing the restore does to `path` (`verb`: one of `VERBS`). `entry` is what the
    path becomes; for `remove`, what is removed (as it is now)."""

    verb: str
    path: str
    entry: Entry


@frozen
class Conflict:
    """A path in the undo's way and why. `overwritten`: forced, the undo puts it back all
    the same; else it is left as it is (with `force` or without)."""

    path: str
    reason: str
    overwritten: bool = False


@frozen
class Plan:
    """What an undo does: `actions` in order (removals children first, then creations
    parents first, then the modes and owners of what stays, children first), the
    `conflicts`, whether `forced`, and a `token` naming all of it with the manifests it was
    made from, for a confirm to check nothing changed since its preview."""

    actions: tuple[Action, ...]
    conflicts: tuple[Conflict, ...]
    token: str
    forced: bool = False

    @property
    def stops(self) -> bool:
        """Whether the restore refuses it: conflicts, not forced."""
        return bool(self.conflicts) and not self.forced


def plan_restore(
    target: Manifest, steps: Sequence[Step], now: Manifest, *, force: bool = False
) -> Plan:
    """How to bring the paths the session's own `steps` touched back to `target` from `now`.

    `steps` are the recorded calls on this root since `target` (`steps[0].before`), in
    order, every session's. Only touched paths are ever in the plan; a touched path someone
    else changed since is a conflict (with `force`, overwritten all the same).
    """
    touched: set[str] = set()
    for step in steps:
        if step.ours:
            touched |= changed(step.before, step.after)
    foreign = _foreign(steps, now, touched)
    conflicts: dict[str, Conflict] = {}
    removals: dict[str, Entry] = {}
    creations: dict[str, Entry] = {}
    attributes: list[Action] = []
    for path in sorted(touched):
        want, have = target.get(path), now.get(path)
        if want == have:
            continue
        reason = foreign.get(path)
        if reason is not None:
            conflicts[path] = Conflict(path, reason, overwritten=force)
            if not force:
                continue
        if want is not None and want.kind == "other":
            why = "was a FIFO, socket or device, which an undo neither makes nor changes"
            conflicts[path] = Conflict(path, why)
        elif want is not None and have is not None and _attributes_only(want, have):
            attributes += _attribute_actions(path, want, have)
        else:
            if have is not None and (want is None or "dir" in (want.kind, have.kind)):
                removals[path] = have  # a rename replaces all but a folder, or by a folder
            if want is not None:
                creations[path] = want
    _keep_folders_in_use(now, removals, creations, conflicts)
    _keep_homeless(now, removals, creations, conflicts)
    actions = [
        *(Action("remove", p, removals[p]) for p in sorted(removals, key=_deepest_first)),
        *(Action(_MAKE[e.kind], p, e) for p, e in sorted(creations.items(), key=_parents)),
        *sorted(attributes, key=lambda a: (*_deepest_first(a.path), a.verb)),
    ]
    found = tuple(conflicts[p] for p in sorted(conflicts))
    return Plan(tuple(actions), found, _token(target, now, actions, found, force), force)


def _foreign(steps: Sequence[Step], now: Manifest, touched: set[str]) -> dict[str, str]:
    """The touched paths someone else changed since, each with its latest such change in
    words: in another session's call, or between two calls (and since the last)."""
    pairs: list[tuple[Manifest, Manifest]] = []
    for i, step in enumerate(steps):
        if not step.ours:
            pairs.append((step.before, step.after))
        pairs.append((step.after, steps[i + 1].before if i + 1 < len(steps) else now))
    reasons: dict[str, str] = {}
    for a, b in pairs:
        for path in touched:
            was, became = a.get(path), b.get(path)
            if was == became:
                continue
            if was is None:
                reasons[path] = "made since by someone else"
            elif became is None:
                reasons[path] = "removed since by someone else"
            else:
                reasons[path] = "changed since by someone else"
    return reasons


def _attributes_only(want: Entry, have: Entry) -> bool:
    """Whether `have` becomes `want` by a chmod or chown alone."""
    return want.kind == have.kind and evolve(want, mode=have.mode, uid=have.uid, gid=have.gid) == (
        have
    )


def _attribute_actions(path: str, want: Entry, have: Entry) -> list[Action]:
    found = []
    if want.mode != have.mode and want.kind != "link":  # a link's mode means nothing
        found.append(Action("chmod", path, want))
    if (want.uid, want.gid) != (have.uid, have.gid):
        found.append(Action("chown", path, want))
    return found


def _keep_folders_in_use(
    now: Manifest,
    removals: dict[str, Entry],
    creations: dict[str, Entry],
    conflicts: dict[str, Conflict],
) -> None:
    """Leave out the removal of every folder that would still hold something (a file made
    since by someone else, or a path in conflict), and what was to take its place."""
    children: dict[str, list[str]] = {}
    for path in now:
        parent, _, _ = path.rpartition("/")
        children.setdefault(parent, []).append(path)
    for path in sorted(removals, key=_deepest_first):
        if removals[path].kind != "dir":
            continue
        kept = [child for child in children.get(path, ()) if child not in removals]
        if kept:
            made = any(child not in conflicts for child in kept)
            why = "holds files made since" if made else "holds files changed since"
            conflicts[path] = Conflict(path, f"{why} by someone else")
            del removals[path]
            creations.pop(path, None)


def _keep_homeless(
    now: Manifest,
    removals: dict[str, Entry],
    creations: dict[str, Entry],
    conflicts: dict[str, Conflict],
) -> None:
    """Leave out every creation whose folder will not be there: gone, or something else now,
    and neither made by the plan."""
    for path in sorted(creations, key=_parents):
        parts = parts_of(path)
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            made = creations.get(folder)
            if made is not None and made.kind == "dir":
                continue
            there = now.get(folder)
            if there is not None and there.kind == "dir" and folder not in removals:
                continue
            if there is None:
                why = f"its folder {folder} is gone"
            elif there.kind == "link":
                why = f"its folder {folder} is a link now"
            else:
                why = f"its folder {folder} is not a folder now"
            conflicts[path] = Conflict(path, why)
            del creations[path]
            break


def _deepest_first(path: str) -> tuple[int, str]:
    return (-path.count("/"), path)


def _parents(item: str | tuple[str, Entry]) -> tuple[str, ...]:
    return parts_of(item if isinstance(item, str) else item[0])


def _token(
    target: Manifest,
    now: Manifest,
    actions: list[Action],
    conflicts: tuple[Conflict, ...],
    forced: bool,
) -> str:
    """A name for the plan and what it was made from: equal only for the same target, the
    same root now (all of it, as an undo sees it), the same actions and conflicts."""
    rows = [
        [a.verb, a.path, a.entry.kind, a.entry.mode, a.entry.uid, a.entry.gid, a.entry.sha256,
         a.entry.target]
        for a in actions
    ]  # fmt: skip
    named = [manifest_id(target), manifest_id(now), forced, rows]
    named.append([[c.path, c.reason, c.overwritten] for c in conflicts])
    return hashlib.sha256(json.dumps(named, separators=(",", ":")).encode("ascii")).hexdigest()
