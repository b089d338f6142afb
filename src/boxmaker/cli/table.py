"""Terminal tables for `bxctl`'s session commands: aligned columns, relative times, ids
shortened without becoming ambiguous, colour only where wanted. Pure: values in, text out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

__all__ = ["BOLD", "DIM", "RESET", "ago", "align", "resolve", "shorten", "style"]

DIM = "\x1b[2m"
BOLD = "\x1b[1m"
RESET = "\x1b[0m"
SHORT = 22  # ids this long or shorter are shown whole
SUFFIX = 4  # the fewest characters of a shortened id


def style(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{RESET}" if color and text else text


def ago(moment: datetime | None, now: datetime) -> str:
    """`just now`, `42 s ago`, `5 min ago`, `3 h ago`, `2 d ago`; the date after 30 days."""
    if moment is None:
        return "-"
    seconds = (now - moment).total_seconds()
    if seconds < 10:
        return "just now"
    for size, unit in ((60, "s"), (3600, "min"), (86400, "h"), (30 * 86400, "d")):
        if seconds < size:
            previous = {"s": 1, "min": 60, "h": 3600, "d": 86400}[unit]
            return f"{int(seconds // previous)} {unit} ago"
    return moment.strftime("%Y-%m-%d")


def shorten(ids: Sequence[str]) -> dict[str, str]:
    """Each id as shown: whole when short, else `…` and its shortest suffix (at least
    `SUFFIX` characters) that no other id ends with."""
    shown = {}
    for name in ids:
        if len(name) <= SHORT:
            shown[name] = name
            continue
        for size in range(SUFFIX, len(name)):
            tail = name[-size:]
            if not any(other != name and other.endswith(tail) for other in ids):
                shown[name] = "…" + tail
                break
        else:
            shown[name] = name
    return shown


def resolve(given: str, ids: Iterable[str]) -> list[str]:
    """The ids `given` names: itself when it is one; else those it begins or (as a shortened
    id shows it, `…` and all) ends."""
    every = list(ids)
    if given in every:
        return [given]
    part = given.removeprefix("…")
    starts = [name for name in every if name.startswith(part)]
    return starts or [name for name in every if name.endswith(part)]


def align(rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> list[str]:
    """Rows of cells as lines of aligned columns (two spaces apart); the columns in `right`
    are aligned right (numbers). The last column is not padded."""
    if not rows:
        return []
    right = set(right)
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = []
        for column, cell in enumerate(row):
            last = column == len(row) - 1
            if column in right:
                cells.append(cell.rjust(widths[column]))
            else:
                cells.append(cell if last else cell.ljust(widths[column]))
        lines.append("  ".join(cells).rstrip())
    return lines
