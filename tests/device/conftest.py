"""The verify-device tier: tests against the real llama-server built by `make llama-server`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from boxmaker.testing.llama import LlamaServer, open_llama_server


@pytest.fixture
async def llama_server(tmp_path: Path) -> AsyncIterator[LlamaServer]:
    """The real server with the model's own template and SPEC section 11's flags."""
    async with open_llama_server(tmp_path / "logs") as server:
        yield server
