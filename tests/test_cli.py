"""The console scripts exist and answer --help and --version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from boxmaker import __version__
from boxmaker.cli import bxctl, loopd

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
