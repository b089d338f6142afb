"""Sizes for the reliability tests, and the counts they report.

`make test` runs the quick size; `make soak` sets `BOXMAKER_SOAK=1` for the long one. Each test
adds what it did (kills, frames, connections, faults) and what came of it to `COUNTS`, which
the terminal summary prints (see `conftest.py`).
"""

from __future__ import annotations

import os
from collections import Counter

SOAK = os.environ.get("BOXMAKER_SOAK") == "1"

COUNTS: dict[str, Counter[str]] = {}
NOTES: list[str] = []


def size(quick: int, soak: int) -> int:
    return soak if SOAK else quick


def count(what: str, outcome: str, n: int = 1) -> None:
    """`n` more of `what` (kills, frames, ...) that came out as `outcome`."""
    COUNTS.setdefault(what, Counter())[outcome] += n


def note(line: str) -> None:
    """A figure for the summary (a memory reading, ...)."""
    NOTES.append(line)
