"""The room every checkpoint test builds its trees in."""

from __future__ import annotations

from pathlib import Path

import pytest

from .room import Room


@pytest.fixture
def room(tmp_path: Path) -> Room:
    return Room(tmp_path)
