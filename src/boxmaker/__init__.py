"""Boxmaker's agent loop: `loopd`, a trio daemon next to llama-server, and `bxctl chat`."""

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    __version__ = version("boxmaker")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

SYSTEM_MD = Path(__file__).with_name("system.md")
"""The starting system prompt (SPEC section 5), shipped with the package: yours to copy and edit."""

__all__ = ["SYSTEM_MD", "__version__"]
