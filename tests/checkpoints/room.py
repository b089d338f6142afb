"""A root on disk with its book, driven as brokerd's service will drive them: a snapshot
before and after each call, the pair recorded, an undo selected, planned and restored."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from boxmaker.brokerd.checkpoints import (
    Book,
    Checkpoint,
    Manifest,
    Plan,
    Selection,
    StatCache,
    plan_restore,
    restore,
    snapshot,
)

ROOT = "workspace"
OURS = "ours-identity"


class Room:
    """`root` (the workspace), `outside` (a folder beside it, holding `secret.txt`), and
    the book in `book/`."""

    def __init__(self, tmp_path: Path, keep_bytes: int = 1 << 30) -> None:
        self.root = tmp_path / "root"
        self.root.mkdir()
        self.outside = tmp_path / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_bytes(b"the owner's secret, never to be read")
        self.book = Book(tmp_path / "book", keep_bytes)
        self.cache = StatCache()
        st = os.stat(self.root)
        self.identity = (st.st_dev, st.st_ino)

    def snap(self) -> Manifest:
        found = snapshot(
            self.root,
            self.identity,
            self.book.objects,
            max_files=10_000,
            max_bytes=1 << 26,
            cache=self.cache,
        )
        assert isinstance(found, dict), found
        return found

    def call(
        self,
        change: Callable[[Path], object],
        *,
        turn: int = 1,
        call: int = 1,
        identity: str = OURS,
    ) -> Checkpoint | None:
        """A tool call of the session `identity` that makes `change` to the root."""
        before = self.snap()
        change(self.root)
        after = self.snap()
        return self.book.record(
            ROOT, before, after, session="s", identity=identity, turn=turn, call=call, tool="t"
        )

    def plan(self, *, turn: int = 1, force: bool = False) -> tuple[Plan, Selection]:
        selection = self.book.select(ROOT, OURS, turn=turn)
        assert isinstance(selection, Selection), selection
        return plan_restore(selection.target, selection.steps, self.snap(), force=force), selection

    def undo(self, *, turn: int = 1, force: bool = False) -> list[str]:
        plan, selection = self.plan(turn=turn, force=force)
        return restore(self.root, self.identity, plan, selection.target, self.book.objects)
