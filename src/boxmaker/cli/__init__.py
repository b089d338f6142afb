"""`bxctl`, the command-line channel: chat, sessions, approvals, memory and the rest."""

from __future__ import annotations

__all__ = ["main"]


def main() -> int:
    """The `bxctl` command. Its modules are imported with the cycle collector off and then
    frozen out of its reach: they live as long as the process, and collecting them while they
    load, then once more at exit, was a sixth of `bxctl sessions`' 150 ms (docs/benchmarks.md,
    the footprint row)."""
    import gc

    gc.disable()
    try:
        from .bxctl import main as bxctl
    finally:
        gc.freeze()
        gc.enable()
    return bxctl()
