"""Checkpoints around the calls that may change a root, and undo (SPEC section 21): brokerd's
side, over the blocking core in `checkpoints/`.

Which root a call may change (its *unit*): a file tool's write, the root its path lands in
(the workspace for one inside it); `shell`, `run_cell` and an MCP tool that may write, the
workspace (the sandbox writes nothing else). The root is snapshotted before the call and
after it, and the pair recorded in the `Book`; calls are not serialised (the sandbox runs
several at once), so what another session's call changed while one ran is counted as that
one's, and an undo of either sees the other's changes as someone else's: it stops on them.
A root over its bounds is not checkpointed: the call says so, and `bxctl tools` shows it.

An undo selects, for each root, the session's first checkpoint from the turn (or call) asked
and every recorded call after it, snapshots the root as it is now, and plans the restore; the
preview lists the plan and its token, the confirm makes it only while the token is the same,
and records the restore as a call of its own (`undo`), so a later undo sees it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import trio

from .. import layout
from ..config import CheckpointsConfig
from ..proto import (
    ErrorCode,
    ToolRequest,
    UndoChange,
    UndoFrame,
    UndoneFrame,
    UndoPreviewFrame,
    WireError,
)
from .checkpoints import (
    Book,
    CheckpointError,
    Entry,
    Manifest,
    OverBounds,
    Plan,
    RestoreStopped,
    Selection,
    StatCache,
    diff_text,
    plan_restore,
    restore,
    shown_path,
    snapshot,
)
from .files.roots import Root, inside
from .policy.decide import writes_or_runs
from .policy.rules import Policy, Verdict
from .registry import Kind, RegistryEntry

__all__ = ["MOST_LISTED", "NO_CHECKPOINT", "Checkpointing"]

log = logging.getLogger("brokerd")
UndoAnswer = UndoPreviewFrame | UndoneFrame | WireError
T = TypeVar("T")

NO_CHECKPOINT = "(No checkpoint was taken: {root} {why}. This call cannot be undone.)"
CROSSED = "(No checkpoint was kept: {root} {why} after this call. It cannot be undone.)"
MOST_LISTED = 100  # paths an undo names; the rest counted
_MOST_DIFFS = 40  # text files whose diff a preview shows
_DIFF_LINES = 80  # of each, its middle left out past them (each line at most 400 characters)
_PATH_CHARS = 1_000  # of a path a preview or an undo shows
MOST_DIFFED = 256 * 1024  # bytes of a file whose diff is shown; a bigger one, its size


class Checkpointing:
    """The checkpoints of one brokerd, kept under `<home>/broker/checkpoints`."""

    def __init__(self, home: Path, config: CheckpointsConfig, *, threads: bool = True) -> None:
        self.book = Book(layout.broker_folder(home) / "checkpoints", config.keep_bytes)
        self.config = config
        self.state: dict[str, str] = {}  # root name -> "" (checkpointed) or why not
        self._locks: defaultdict[str, trio.Lock] = defaultdict(trio.Lock)
        self._caches: defaultdict[str, StatCache] = defaultdict(StatCache)
        self._threads = threads
        self._under_way: dict[object, Manifest] = {}  # the "before" of each call running

    async def _blocking(self, work: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(work, *args) if self._threads else work(*args)

    def unit(self, roots: Sequence[Root], located: Root | None) -> Root | None:
        """The root a call checkpoints (`roots[0]` the workspace): `located`'s (a file tool's
        root; the workspace for one inside it), else the workspace; None when not writable."""
        workspace = roots[0]
        root = located or workspace
        if root.path == workspace.path or inside(root.path, workspace.path):
            root = workspace
        return root if root.write else None

    def unit_of(
        self, policy: Policy, entry: RegistryEntry | None, verdict: Verdict, roots: Sequence[Root]
    ) -> Root | None:
        """The root a call of `entry` may change, checkpointed around it (None: none)."""
        if entry is None or not writes_or_runs(policy, entry):
            return None
        if entry.kind is Kind.FILE:
            located = verdict.located
            return None if located is None else self.unit(roots, located.root)
        if entry.kind in (Kind.SANDBOXED, Kind.MCP):
            return self.unit(roots, None)
        return None  # the notes and the schedules are no root's

    def said(self, roots: Sequence[Root]) -> dict[str, str]:
        """What `bxctl tools` says of each writable root's checkpoints: kept, or why not."""
        said = {}
        for root in roots:
            unit = self.unit(roots, root) if root.write else None  # a read-only one: nothing
            if unit is not None:
                why = self.state.get(unit.name)
                said[root.name] = (
                    "not looked at yet" if why is None else "kept" if not why else f"none: {why}"
                )
        return said

    def _skip(self, root: Root, roots: Sequence[Root]) -> list[tuple[int, int]]:
        """The folders a snapshot of `root` never enters: the closed roots inside it, and
        every other root inside it that is checkpointed on its own."""
        workspace = roots[0]
        return [
            other.identity
            for other in roots
            if other.identity is not None
            and inside(other.path, root.path)
            and (other.closed or (root is not workspace and other.write))
        ]

    async def _snapshot(self, root: Root, roots: Sequence[Root]) -> Manifest | str:
        """What `root` holds now, or why it has no checkpoint (said in `state` too)."""
        config = self.config

        def take() -> Manifest | OverBounds:
            return snapshot(
                Path(root.path),
                root.identity,
                self.book.objects,
                skip=self._skip(root, roots),
                max_files=config.max_files,
                max_bytes=config.max_root_bytes,
                cache=self._caches[root.name],
            )

        try:
            taken = await self._blocking(take)
        except CheckpointError as error:
            taken = OverBounds(str(error))
        if isinstance(taken, OverBounds):
            self.state[root.name] = taken.reason
            return taken.reason
        self.state[root.name] = ""
        return taken

    @contextlib.asynccontextmanager
    async def around(
        self, request: ToolRequest, root: Root, roots: Sequence[Root]
    ) -> AsyncIterator[list[str]]:
        """Hold `root` for the call of `request`: snapshotted before it and after, the pair
        recorded. Yields the notes the call's result gets (its root has no checkpoint)."""
        notes: list[str] = []
        async with self._locks[root.name]:
            before = await self._snapshot(root, roots)
        if isinstance(before, str):
            notes.append(NO_CHECKPOINT.format(root=root.shown, why=before))
            yield notes
            return
        key = object()
        self._under_way[key] = before  # a trim keeps what it names until it is recorded
        try:
            yield notes  # not under the lock: calls run at once, as many as the sandbox lets
        finally:
            with trio.CancelScope(shield=True):  # however the call ended
                async with self._locks[root.name]:
                    lost = await self._after(request, root, roots, before, key)
            if lost is not None:
                notes.append(CROSSED.format(root=root.shown, why=lost))

    async def _after(
        self,
        request: ToolRequest,
        root: Root,
        roots: Sequence[Root],
        before: Manifest,
        key: object = None,
    ) -> str | None:
        """Record the call of `request` on `root`, from `before` to what it holds now; why it
        could not be (the root is past its bounds now: the call cannot be undone), else None."""
        after = await self._snapshot(root, roots)
        turn, call = request.turn or 0, request.call

        def record() -> None:
            if isinstance(after, str):
                self.book.lose(root.name, request.identity, turn, call)
                return
            self.book.record(
                root.name,
                before,
                after,
                session=request.session.value,
                identity=request.identity,
                turn=turn,
                call=call,
                tool=request.tool,
            )
            self._under_way.pop(key, None)
            self.book.trim(holding=list(self._under_way.values()))

        try:
            await self._blocking(record)
        except CheckpointError as error:
            log.warning("the checkpoint of %s was not kept: %s", request.tool, error)
        finally:
            self._under_way.pop(key, None)
        return after if isinstance(after, str) else None

    async def warm(self, roots: Callable[[], Sequence[Root]]) -> None:
        """Snapshot each writable root once (brokerd's start): its state is known, and its
        first call reads only what changed since."""
        present = roots()
        for root in {self.unit(present, r) for r in present} - {None}:
            assert root is not None
            async with self._locks[root.name]:
                await self._snapshot(root, present)

    async def undo(self, frame: UndoFrame, roots: Sequence[Root]) -> UndoAnswer:
        """The preview of `frame`'s undo, or (with its token) the undo done."""
        if frame.turn is None and frame.call is None:
            return WireError(ErrorCode.BAD_FRAME, "an undo names a turn or a call")
        units = [r for r in roots if self.unit(roots, r) is r]
        async with contextlib.AsyncExitStack() as held:
            for root in units:  # every root held while it is planned and restored
                await held.enter_async_context(self._locks[root.name])
            planned, notes = await self._plans(frame, units, roots)
            if not planned:
                why = "; ".join(notes) or "nothing of this session's is checkpointed"
                return WireError(ErrorCode.CANNOT_UNDO, why)
            token = hashlib.sha256("".join(p.token for _r, _s, p, _n in planned).encode())
            if not frame.confirm:
                return await self._preview(frame, planned, notes, token.hexdigest())
            if frame.confirm != token.hexdigest():
                return WireError(
                    ErrorCode.CANNOT_UNDO,
                    "the files changed since the preview (or it was another's): nothing was "
                    "undone; ask for the preview again",
                )
            return await self._restore(frame, planned, roots)

    async def _plans(
        self, frame: UndoFrame, units: Sequence[Root], roots: Sequence[Root]
    ) -> tuple[list[tuple[Root, Selection, Plan, Manifest]], list[str]]:
        planned, notes = [], []
        for root in units:
            try:
                chosen = await self._blocking(
                    lambda r=root: self.book.select(
                        r.name, frame.identity, turn=frame.turn, call=frame.call
                    )
                )
            except CheckpointError as error:  # a manifest damaged or gone
                chosen = f"{root.shown}: {error}"
            if isinstance(chosen, str):
                notes.append(chosen)
                continue
            now = await self._snapshot(root, roots)
            if isinstance(now, str):
                notes.append(f"{root.shown} has no checkpoint now: {now}")
                continue
            plan = plan_restore(chosen.target, chosen.steps, now, force=frame.force)
            planned.append((root, chosen, plan, now))
        return planned, notes

    async def _preview(
        self,
        frame: UndoFrame,
        planned: list[tuple[Root, Selection, Plan, Manifest]],
        notes: list[str],
        token: str,
    ) -> UndoPreviewFrame | WireError:
        try:
            changes, conflicts, more = await self._blocking(self._listed, planned)
        except CheckpointError as error:  # a blob damaged or gone
            return WireError(ErrorCode.CANNOT_UNDO, _said(str(error)))
        if more:
            notes = [*notes, f"{more:,} more changes and conflicts are not listed"]
        said = tuple(_said(note) for note in notes)
        return UndoPreviewFrame(frame.session, changes, conflicts, token, said)

    def _listed(
        self, planned: list[tuple[Root, Selection, Plan, Manifest]]
    ) -> tuple[tuple[UndoChange, ...], tuple[UndoChange, ...], int]:
        """The changes and the conflicts a preview lists, `MOST_LISTED` of each (how many are
        left out), the first `_MOST_DIFFS` files with their diff: bounded well within a frame.
        Blocking (difflib, the blobs read): run in a worker thread."""
        changes: list[UndoChange] = []
        conflicts: list[UndoChange] = []
        left = 0
        for root, chosen, plan, now in planned:
            for action in plan.actions:
                if len(changes) >= MOST_LISTED:
                    left += 1
                    continue
                diff = ""
                have, want = now.get(action.path), chosen.target.get(action.path)
                files = [e for e in (have, want) if e is not None and e.kind == "file"]
                shown = _shown(root, action.path)
                if action.verb in ("write", "remove") and files and _diffs(changes) < _MOST_DIFFS:
                    if want is not None and action.verb == "remove":
                        want = None  # a folder or a link takes its place: the file goes
                    diff = self._diff(have, want, shown)
                changes.append(UndoChange(shown, action.verb, diff))
            for conflict in plan.conflicts:
                if len(conflicts) >= MOST_LISTED:
                    left += 1
                    continue
                conflicts.append(UndoChange(_shown(root, conflict.path), _said(conflict.reason)))
        return tuple(changes), tuple(conflicts), left

    def _diff(self, have: Entry | None, want: Entry | None, shown: str) -> str:
        """The diff from the file now (`have`) to the file put back (`want`); a file too big
        to diff is not read, its size is said."""
        files = [e if e is not None and e.kind == "file" else None for e in (have, want)]
        if any(e is not None and e.size > MOST_DIFFED for e in files):
            sizes = [f"{e.size:,} bytes" if e is not None else "none" for e in files]
            return f"file too long to show, {sizes[0]} → {sizes[1]}"
        old, new = (self.book.objects.read(e.sha256) if e else None for e in files)
        return diff_text(old, new, shown, _DIFF_LINES)

    async def _restore(
        self,
        frame: UndoFrame,
        planned: list[tuple[Root, Selection, Plan, Manifest]],
        roots: Sequence[Root],
    ) -> UndoneFrame | WireError:
        done: list[str] = []
        for root, chosen, plan, now in planned:
            try:
                changed = await self._blocking(
                    restore, Path(root.path), root.identity, plan, chosen.target, self.book.objects
                )
            except (CheckpointError, RestoreStopped) as error:
                return WireError(ErrorCode.CANNOT_UNDO, _said(f"{root.shown}: {error}"))
            finally:
                request = ToolRequest(frame.session, 0, "undo", "{}", identity=frame.identity)
                with trio.CancelScope(shield=True):
                    await self._after(request, root, roots, now)
            done += [_shown(root, path) for path in dict.fromkeys(changed)]
            log.info("%s: %d paths restored (undo of %s)", root.shown, len(changed), frame.session)
        return UndoneFrame(
            frame.session, tuple(done[:MOST_LISTED]), max(0, len(done) - MOST_LISTED)
        )


def _shown(root: Root, path: str) -> str:
    """A path as the model writes it (relative in the workspace, else absolute), safe on the
    wire and at a terminal: a name that is not UTF-8 as U+FFFD, controls escaped, at most
    `_PATH_CHARS` characters."""
    full = path if root.name == "workspace" else str(PurePosixPath(root.path) / path)
    shown = shown_path(full)
    return shown if len(shown) <= _PATH_CHARS else f"{shown[: _PATH_CHARS - 1]}…"


def _said(text: str) -> str:
    """An error or a note that may quote a path, safe on the wire (no lone surrogate)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _diffs(changes: list[UndoChange]) -> int:
    return sum(1 for change in changes if change.diff)
