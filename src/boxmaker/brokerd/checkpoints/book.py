"""The record of checkpoints (`Book`): one line of `log.jsonl` per tool call that changed a
root, naming the manifests before and after it (stored in `objects/` with the files' bytes),
and which session's call it was. Blocking calls, one at a time (brokerd's service holds the
book); `snapshot.py` makes the manifests, `plan.py` decides an undo from a `Selection`.

What is kept is bounded (`trim`): past `keep_bytes` of objects the oldest checkpoints go
first, with every blob no kept one needs. What went is remembered in `kept.json` (the highest
seq dropped, each root's latest manifest, each session's latest turn and call dropped), so a
lookup can say "no longer kept" rather than "made no change", and never restores past a gap.
Each file is written whole (a line appended and fsynced, or a temp file renamed over); a log
line that is not what this module writes is an error naming its line, read with bounds.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from attrs import asdict, frozen

from ._disk import load_json_lines, read_bounded, replace_file
from .errors import CheckpointError
from .manifest import Manifest, decode, encode, is_id
from .objects import Objects
from .plan import Step

__all__ = ["KEPT", "LOG", "OBJECTS", "Book", "Checkpoint", "Selection"]

LOG = "log.jsonl"
KEPT = "kept.json"
OBJECTS = "objects"
_MAX_KEPT = 16 << 20
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


@frozen
class Checkpoint:
    """One recorded call on `root` (the root's name): the manifests `before` and `after` it
    (ids in the objects store), the session (`session`, its id; `identity`, which session
    of that id), the turn, the call, the tool, and when (UTC, RFC 3339)."""

    seq: int
    root: str
    before: str
    after: str
    session: str
    identity: str
    turn: int
    call: int
    tool: str
    time: str


@frozen
class Selection:
    """What an undo starts from: the manifest to restore (`target`, id `target_id`), and
    every recorded call on the root since (`steps`, `checkpoints`), every session's."""

    target: Manifest
    target_id: str
    steps: tuple[Step, ...]
    checkpoints: tuple[Checkpoint, ...]


class Book:
    """The checkpoints kept in `folder` (made 0700): `log.jsonl`, `kept.json`, `objects/`.

    Raises (when made):
        CheckpointError: the log or `kept.json` is damaged (the message names the line).
    """

    def __init__(self, folder: Path, keep_bytes: int) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        self.folder = folder
        self.keep_bytes = keep_bytes
        self.objects = Objects(folder / OBJECTS)
        self._dropped, self._latest, self._lost = _load_kept(folder / KEPT)
        self._last: dict[str, tuple[Manifest, str]] = {}  # by root: the manifest stored last
        self._log: list[Checkpoint] = [
            c for c in _load_log(folder / LOG) if c.seq > self._dropped
        ]  # a trim that stopped between its two writes dropped these

    def record(
        self,
        root: str,
        before: Manifest,
        after: Manifest,
        *,
        session: str,
        identity: str,
        turn: int,
        call: int,
        tool: str,
        time: str | None = None,
    ) -> Checkpoint | None:
        """Record a call on `root` that made `before` into `after`: the manifests stored, the
        line appended and fsynced; the checkpoint, or None when nothing changed (an unchanged
        call is left out: it touches nothing, and the next call's `before` follows on).

        Raises:
            CheckpointError: it cannot be written (the file system's reason).
        """
        if before == after:
            return None
        try:
            ids = self._stored(root, before), self._stored(root, after)
            self.objects.sync()  # the blobs the snapshots stored, and these, before naming them
            seq = max([self._dropped, *(c.seq for c in self._log[-1:])]) + 1
            when = time or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            made = Checkpoint(seq, root, *ids, session, identity, turn, call, tool, when)
            fd = os.open(self.folder / LOG, _APPEND, 0o600)
            try:
                os.write(fd, _line(made))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise CheckpointError(f"cannot record a checkpoint in {self.folder}: {exc}") from exc
        self._log.append(made)
        return made

    def _stored(self, root: str, manifest: Manifest) -> str:
        """`manifest` stored, its id: a call's `before` is most often the call before's
        `after`, stored already (encoding 10⁴ entries costs more than comparing them)."""
        last = self._last.get(root)
        if last is not None and last[0] == manifest and self.objects.has(last[1]):
            return last[1]
        stored = self.objects.put_bytes(encode(manifest))
        self._last[root] = (manifest, stored)
        return stored

    def entries(self, root: str) -> list[Checkpoint]:
        """The kept checkpoints of `root`, oldest first."""
        return [c for c in self._log if c.root == root]

    def latest(self, root: str) -> str | None:
        """The id of `root`'s manifest after its latest recorded call (kept even when that
        checkpoint is not), or None: never checkpointed."""
        mine = self.entries(root)
        return mine[-1].after if mine else self._latest.get(root)

    def manifest(self, manifest_id: str) -> Manifest:
        """The manifest stored as `manifest_id`.

        Raises:
            CheckpointError: it is missing or damaged.
        """
        return decode(self.objects.read(manifest_id))

    def select(
        self, root: str, identity: str, *, turn: int | None = None, call: int | None = None
    ) -> Selection | str:
        """Where an undo of the session `identity`'s changes to `root` from `turn` on (or
        from `call` on; both: that call of that turn) starts: its first checkpoint then, and
        every one after on the root; or a sentence saying why there is none.

        Raises:
            CheckpointError: a manifest is missing or damaged.
        """
        if turn is None and call is None:
            raise ValueError("select needs a turn or a call")
        what = f"call {call}" if call is not None else f"turn {turn}"
        mine = self.entries(root)
        start = next((i for i, c in enumerate(mine) if _matches(c, identity, turn, call)), None)
        lost_turn, lost_call = self._lost.get((root, identity), (-1, -1))
        if (call is None and turn is not None and lost_turn >= turn) or (
            start is None and call is not None and lost_call >= call
        ):
            return (
                f"the checkpoints of {what} are not kept (dropped for [checkpoints] keep_bytes, "
                "or a call then left the root past its bounds)"
            )
        if start is None:
            where = "the workspace" if root == "workspace" else f"the root {root}"
            return f"{what} made no change to {where}"
        loaded: dict[str, Manifest] = {}

        def load(manifest_id: str) -> Manifest:
            if manifest_id not in loaded:
                loaded[manifest_id] = self.manifest(manifest_id)
            return loaded[manifest_id]

        chosen = tuple(mine[start:])
        steps = tuple(Step(load(c.before), load(c.after), c.identity == identity) for c in chosen)
        return Selection(steps[0].before, chosen[0].before, steps, chosen)

    def lose(self, root: str, identity: str, turn: int, call: int) -> None:
        """A call of `identity`'s on `root` went unrecorded (the root was past its bounds after
        it): an undo from its turn (or call), or before, says its checkpoints are not kept.

        Raises:
            CheckpointError: it cannot be written.
        """
        held, called = self._lost.get((root, identity), (-1, -1))
        self._lost[(root, identity)] = (max(held, turn), max(called, call))
        try:
            replace_file(self.folder / KEPT, _kept_bytes(self._dropped, self._latest, self._lost))
        except OSError as exc:
            raise CheckpointError(f"cannot write {self.folder / KEPT}: {exc}") from exc

    def trim(self, holding: Iterable[Manifest] = ()) -> int:
        """While the objects take more than `keep_bytes`, drop the oldest checkpoints, then
        remove every blob that no kept checkpoint, no root's latest manifest and none of
        `holding` (the manifests of calls under way, not yet recorded) needs. How many
        checkpoints were dropped. Nothing is done under the bound.

        Raises:
            CheckpointError: a manifest is damaged, or the file system fails.
        """
        try:
            return self._trim(holding)
        except OSError as exc:
            raise CheckpointError(f"cannot trim the checkpoints in {self.folder}: {exc}") from exc

    def _trim(self, holding: Iterable[Manifest]) -> int:
        if self.objects.size_of_all() <= self.keep_bytes:
            return 0  # known without a look at the disk: asked after every call
        sizes = self.objects.sizes()
        needs: dict[str, set[str]] = {}

        def needed(manifest_id: str) -> set[str]:
            if manifest_id not in needs:
                files = self.manifest(manifest_id).values()
                needs[manifest_id] = {manifest_id} | {e.sha256 for e in files if e.kind == "file"}
            return needs[manifest_id]

        pinned = {e.sha256 for m in holding for e in m.values() if e.kind == "file"}
        for root in {c.root for c in self._log} | set(self._latest):
            latest = self.latest(root)
            if latest is not None:
                pinned |= needed(latest)
        counts = Counter(s for c in self._log for s in needed(c.before) | needed(c.after))
        left = sum(size for sha, size in sizes.items() if sha in counts or sha in pinned)
        drop = 0
        while left > self.keep_bytes and drop < len(self._log):
            for sha in needed(self._log[drop].before) | needed(self._log[drop].after):
                counts[sha] -= 1
                if counts[sha] == 0 and sha not in pinned:
                    left -= sizes.get(sha, 0)
            drop += 1
        gone, self._log = self._log[:drop], self._log[drop:]
        for c in gone:
            self._dropped = max(self._dropped, c.seq)
            self._latest[c.root] = c.after
            turn, call = self._lost.get((c.root, c.identity), (-1, -1))
            self._lost[(c.root, c.identity)] = (max(turn, c.turn), max(call, c.call))
        self._latest = {r: m for r, m in self._latest.items() if not self.entries(r)}
        replace_file(self.folder / KEPT, _kept_bytes(self._dropped, self._latest, self._lost))
        replace_file(
            self.folder / LOG,
            b"".join(
                json.dumps(asdict(c), separators=(",", ":")).encode() + b"\n" for c in self._log
            ),
        )
        for sha in sizes:
            if counts[sha] <= 0 and sha not in pinned:
                self.objects.remove(sha)
        return drop


def _line(checkpoint: Checkpoint) -> bytes:
    return json.dumps(asdict(checkpoint), separators=(",", ":")).encode("ascii") + b"\n"


def _matches(c: Checkpoint, identity: str, turn: int | None, call: int | None) -> bool:
    if c.identity != identity:
        return False
    if call is not None:
        return c.call == call and (turn is None or c.turn == turn)
    return turn is not None and c.turn >= turn


_FIELDS: dict[str, type] = {
    "seq": int, "root": str, "before": str, "after": str, "session": str, "identity": str,
    "turn": int, "call": int, "tool": str, "time": str,
}  # fmt: skip


def _load_log(path: Path) -> list[Checkpoint]:
    found: list[Checkpoint] = []
    for number, value in load_json_lines(path):
        if not isinstance(value, dict) or set(value) != set(_FIELDS):
            raise CheckpointError(f"{path} line {number} is not a checkpoint: its keys differ")
        for key, kind in _FIELDS.items():
            if type(value[key]) is not kind or (kind is str and len(value[key]) > 4096):
                raise CheckpointError(f"{path} line {number}: {key} is not a {kind.__name__}")
        made = Checkpoint(**value)
        if not (is_id(made.before) and is_id(made.after)):
            raise CheckpointError(f"{path} line {number}: a manifest id is not a SHA-256")
        if found and made.seq <= found[-1].seq:
            raise CheckpointError(f"{path} line {number}: seq {made.seq} does not follow on")
        found.append(made)
    return found


def _kept_bytes(
    dropped: int, latest: dict[str, str], lost: dict[tuple[str, str], tuple[int, int]]
) -> bytes:
    sessions = [[root, identity, *lost[(root, identity)]] for root, identity in sorted(lost)]
    whole = {"dropped": dropped, "latest": latest, "sessions": sessions}
    return json.dumps(whole, sort_keys=True, separators=(",", ":")).encode("ascii")


def _load_kept(path: Path) -> tuple[int, dict[str, str], dict[tuple[str, str], tuple[int, int]]]:
    data = read_bounded(path, _MAX_KEPT)
    if data is None:
        return 0, {}, {}
    damaged = CheckpointError(f"{path} is damaged: remove it to start again")
    try:
        whole = json.loads(data)
    except (ValueError, RecursionError):
        raise damaged from None
    if not isinstance(whole, dict) or set(whole) != {"dropped", "latest", "sessions"}:
        raise damaged
    dropped, latest, sessions = whole["dropped"], whole["latest"], whole["sessions"]
    if type(dropped) is not int or not isinstance(latest, dict) or not isinstance(sessions, list):
        raise damaged
    if not all(isinstance(m, str) and is_id(m) for m in latest.values()):
        raise damaged
    lost: dict[tuple[str, str], tuple[int, int]] = {}
    for row in sessions:
        if not (isinstance(row, list) and [type(v) for v in row] == [str, str, int, int]):
            raise damaged
        lost[(row[0], row[1])] = (row[2], row[3])
    return dropped, latest, lost
