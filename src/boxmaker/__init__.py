"""Boxmaker's agent loop: `loopd`, a trio daemon next to llama-server, and `bxctl chat`."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("boxmaker")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
