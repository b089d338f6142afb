"""Row checkpoint (issue 47): what a checkpoint adds to a call that may change the workspace,
and how long an undo takes, on a workspace of 1,000 files of 10 KB and one of 10,000 files.

For each workspace a `Broker` is built in this process as brokerd builds its own (the shipped
policy, its home), and beside it the same `Broker` with checkpoints off. A call is a
`write_file` of a small file (a new name each time); the pairs run in alternating order, so
drift on the machine hits both alike, and the difference is the two snapshots (before and
after) and the record. The first snapshot of a workspace (every file read and stored once,
as brokerd does at its start) is timed on its own. Then an undo of the turn that made all the
calls: its preview, and its confirm (the restore), each timed.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from boxmaker.brokerd import SHIPPED_POLICY, Broker, builtin_registry, parse_policy
from boxmaker.brokerd.undo import Checkpointing
from boxmaker.clock import SystemClock
from boxmaker.config import DEFAULT_CORE, CheckpointsConfig
from boxmaker.proto import (
    ResultResponse,
    SessionId,
    ToolRequest,
    UndoFrame,
    UndoneFrame,
    UndoPreviewFrame,
)

from .report import Row
from .stats import p90

__all__ = ["run"]

SESSION = SessionId("bench-checkpoint")
IDENTITY = "bench-identity"
AN_HOUR_AGO = time.time() - 3600
BAR_MS = 100.0  # a call on 1,000 files of 10 KB: at most this much added (median)


class _Off(Checkpointing):
    """Checkpoints that never take one: the call as it was before them."""

    def unit_of(self, *_args: object) -> None:
        return None


def _workspace(folder: Path, files: int, size: int) -> None:
    """`files` files of `size` bytes, 100 to a folder, each its own bytes, written an hour ago
    (a file changed in the last 2 s is read again at each snapshot: git's racy rule)."""
    for n in range(files):
        sub = folder / f"d{n // 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"f{n:05d}.txt"
        path.write_bytes(f"{n:05d}".encode() * (size // 5))
        os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))  # as a workspace's files mostly are: old


def _broker(home: Path, workspace: Path, checkpoints: Checkpointing) -> Broker:
    policy_file = home / "policy.toml"
    policy_file.write_text(SHIPPED_POLICY)
    policy = parse_policy(SHIPPED_POLICY, policy_file)
    return Broker(builtin_registry(DEFAULT_CORE), policy, workspace, home, SystemClock(),
                  checkpoints=checkpoints)  # fmt: skip


async def _series(root: Path, files: int, size: int, calls: int) -> dict[str, float]:
    workspace = root / "workspace"
    _workspace(workspace, files, size)
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    kept = Checkpointing(home, CheckpointsConfig())
    on = _broker(home, workspace, kept)
    off = _broker(home, workspace, _Off(home / "off", CheckpointsConfig()))
    started = time.perf_counter()
    await kept.warm(on.roots)
    first = time.perf_counter() - started
    with_ms: list[float] = []
    without_ms: list[float] = []
    for n in range(calls):
        order = ((on, with_ms), (off, without_ms)) if n % 2 else ((off, without_ms), (on, with_ms))
        for broker, into in order:
            name = f"bench/{len(with_ms) + len(without_ms)}.md"
            arguments = f'{{"path":"{name}","content":"x"}}'
            request = ToolRequest(
                SESSION, n + 1, "write_file", arguments, turn=1, identity=IDENTITY
            )
            began = time.perf_counter()
            answer = await broker.call(request)
            into.append((time.perf_counter() - began) * 1000)
            if not isinstance(answer, ResultResponse):
                raise RuntimeError(f"the call was not run: {answer}")
    began = time.perf_counter()
    preview = await on.undo(UndoFrame(SESSION, 1, identity=IDENTITY))
    previewed = time.perf_counter() - began
    if not isinstance(preview, UndoPreviewFrame):
        raise RuntimeError(f"no preview: {preview}")
    began = time.perf_counter()
    done = await on.undo(UndoFrame(SESSION, 1, confirm=preview.token, identity=IDENTITY))
    restored = time.perf_counter() - began
    if not isinstance(done, UndoneFrame) or len(done.restored) + done.more < calls:
        raise RuntimeError(f"not undone: {done}")
    added = [a - b for a, b in zip(with_ms, without_ms, strict=True)]
    return {
        "first_s": first,
        "with": statistics.median(with_ms),
        "without": statistics.median(without_ms),
        "added": statistics.median(added),
        "added_p90": p90(added),
        "preview_s": previewed,
        "restore_s": restored,
        "paths": len(done.restored) + done.more,
        "store_mb": _size(kept.book.folder) / 1e6,
    }


def _size(folder: Path) -> int:
    return sum(entry.stat().st_size for entry in folder.rglob("*") if entry.is_file())


async def run(root: Path, *, workspaces: tuple[tuple[int, int], ...], calls: int) -> Row:
    found = {}
    for files, size in workspaces:
        found[(files, size)] = await _series(root / f"ws-{files}", files, size, calls)
    lines = [
        "A `write_file` of a new small file in a workspace, through an in-process `Broker` with "
        f"checkpoints and the same without, {calls} pairs in alternating order (times in ms, "
        "medians; the added time is the median of the paired differences). The first "
        "snapshot is brokerd's at its start. The undo takes back every call of the series.",
        "",
        "| workspace | first snapshot (s) | call with (ms) | without (ms) | added (ms, p90) "
        "| undo preview (s) | restore (s) | store (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (files, size), f in found.items():
        lines.append(
            f"| {files:,} files of {size // 1000} KB | {f['first_s']:.2f} | {f['with']:.1f} | "
            f"{f['without']:.1f} | {f['added']:.1f} ({f['added_p90']:.1f}) | "
            f"{f['preview_s']:.3f} | {f['restore_s']:.3f} | {f['store_mb']:.0f} |"
        )
    small, large = found[workspaces[0]], found[workspaces[-1]]
    return Row(
        "checkpoint",
        f"+{small['added']:.1f} ms a call on {workspaces[0][0]:,} files "
        f"(+{large['added']:.1f} ms on {workspaces[-1][0]:,}); an undo of {calls} calls: "
        f"preview {large['preview_s'] * 1000:.0f} ms, restore {large['restore_s'] * 1000:.0f} ms "
        f"on {workspaces[-1][0]:,} files",
        f"at most {BAR_MS:g} ms added to a call on {workspaces[0][0]:,} files (median)",
        small["added"] <= BAR_MS,
        tuple(lines),
    )
