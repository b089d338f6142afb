"""Boxmaker's agent loop: `loopd`, a trio daemon next to llama-server, and `bxctl chat`."""

from pathlib import Path

SYSTEM_MD = Path(__file__).with_name("system.md")
"""The starting system prompt (SPEC section 5), shipped with the package: yours to copy and edit."""

__all__ = ["SYSTEM_MD", "__version__"]


def __getattr__(name: str) -> str:
    """`__version__`, read when asked: `importlib.metadata` takes longer to import than most
    of what `bxctl sessions` does."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("boxmaker")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"
