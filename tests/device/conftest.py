"""The verify-device tier: tests against the real llama-server built by `make llama-server`.

Figures a test measures are printed at the end of the run (`figure()`), so `make
verify-device` shows them whatever passed or failed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from bxdev.llama import LlamaServer, free_port, open_llama_server, server_args

from boxmaker import SYSTEM_MD

from ..processes import Process, Stack

FIGURES: list[str] = []


def figure(line: str) -> None:
    FIGURES.append(line)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
async def llama_server(tmp_path: Path) -> AsyncIterator[LlamaServer]:
    """The real server with the model's own template and SPEC section 11's flags."""
    async with open_llama_server(tmp_path / "logs") as server:
        yield server


class DeviceStack(Stack):
    """The real llama-server, brokerd serve and loopd serve, as a person would run them;
    `model` is the
    config's `[model]` section (the SPEC's conversation runs under the native profile, as
    before profiles: the small model's own template renders no tools)."""

    def __init__(
        self,
        root: Path,
        ctx: int = 4096,
        model: str = 'profile = "native"',
        *,
        template: str | None = None,
        inference: str = "",
    ) -> None:
        self.root = root  # the parent's fake is the real server here
        self.home = root / "home"
        self.env = {**os.environ, "BOXMAKER_HOME": str(self.home), "NO_COLOR": "1"}
        (root / "system.md").write_text(SYSTEM_MD.read_text())
        port = free_port()
        self.fake = Process(server_args(port, ctx=ctx, template=template), self.env, root)
        self.fake.err.wait_for("listening on http://127.0.0.1", 300)
        self.config = root / "config.toml"
        self.config.write_text(
            f'[server]\nbase_url = "http://127.0.0.1:{port}"\n'
            f"[inference]\ntemperature = 0.0\nmax_tokens = 48\n{inference}"
            f"[model]\n{model}\n"
        )
        self.socket = self.home / "run" / "loop" / "loop.sock"
        self.workspace = self.home / "workspace"
        self.brokerd = self.start_brokerd()
        self.brokerd.err.wait_for("listening on", 60)
        self.loopd = self.start_loopd()
        self.loopd.err.wait_for("listening on", 300)

    def restart_loopd(self) -> None:
        self.loopd.stop()
        self.loopd = self.start_loopd()
        self.loopd.err.wait_for("listening on", 300)


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeviceStack]:
    stack = DeviceStack(tmp_path_factory.mktemp("device"))
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def fenced_device(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeviceStack]:
    """The same, with `[model] profile = "auto"` (the default), which the real server's
    `/props` makes the small model's fenced profile."""
    stack = DeviceStack(tmp_path_factory.mktemp("fenced"), model='profile = "auto"')
    try:
        yield stack
    finally:
        stack.stop()
