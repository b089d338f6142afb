"""The e2e tests' stacks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..processes import Stack


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[Any]:
    """A maker of stacks (a fake server, brokerd and loopd) in `tmp_path`, each stopped after
    the test."""
    made: list[Stack] = []

    def make(script: dict[str, Any], **kw: Any) -> Stack:
        stack = Stack(tmp_path, script, "--n-ctx", "100000", **kw)
        made.append(stack)
        return stack

    yield make
    for stack in made:
        stack.stop()
