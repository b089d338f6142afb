"""The real sandbox for the tests that need one: skipped where this machine gives none, unless
`BOXMAKER_REQUIRE_SANDBOX` is set (CI sets it: there a skip would hide a broken sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.brokerd.sandbox.bwrap import Sandbox

from ..helpers import real_sandbox


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return real_sandbox(tmp_path / "workspace")


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The folder of one brokerd: `home`, its workspace `ws`, a root `notes`, `policy.toml`."""
    base = tmp_path.resolve()
    for folder in ("home", "ws", "notes"):
        (base / folder).mkdir()
    return base
