"""The console scripts exist and answer --help and --version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from boxmaker import __version__
from boxmaker.cli import bxctl
from boxmaker.loopd import main as loopd

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(("name", "main"), [("loopd", loopd.main), ("bxctl", bxctl.main)])
def test_version_and_help(name: str, main: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert callable(main)
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0
    assert capsys.readouterr().out.strip() == f"{name} {__version__}"
    with pytest.raises(SystemExit) as helped:
        main(["--help"])
    assert helped.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {name}")


@pytest.mark.parametrize("name", ["loopd", "bxctl"])
def test_console_scripts_are_installed(name: str) -> None:
    result = subprocess.run(
        [BIN / name, "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == f"{name} {__version__}"


def test_loopd_serve_help_shows_every_default_and_no_spec_section(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        loopd.main(["serve", "--help"])
    text = capsys.readouterr().out
    assert "SPEC" not in text
    assert "(default: info)" in text
    assert "(default: 10)" in text
    assert 'base_url = "http://127.0.0.1:8080"' in text
    assert "tool_result_cap = 16384" in text


def test_bxctl_chat_help_names_its_defaults_and_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        bxctl.main(["chat", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: $BOXMAKER_HOME/run/loop/loop.sock" in text
    assert "exit codes: 0 done" in text
    assert "/help, /new, /fork, /undo, /rewind, /mode, /plan, /stats, /memory, /schedules," in text
