"""`docs/benchmarks.md`: the machine, the command, a table of every figure beside its bar, and a
section per row. Pure, apart from reading what describes the machine.

`make bench` rewrites only the part between the two markers; what is written around them by
hand (how a missed bar was profiled and fixed, before and after) stays.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

__all__ = ["BEGIN", "END", "Row", "machine", "render", "splice"]

BEGIN = "<!-- make bench writes from here -->"
END = "<!-- to here -->"


@frozen
class Row:
    """One row of SPEC section 12: the figure in a line, its bar, whether it is met, and the
    measurements behind it (markdown lines)."""

    figure: str
    result: str
    bar: str
    met: bool
    details: tuple[str, ...] = ()


def machine() -> list[str]:
    """What the figures were measured on."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if subprocess.run(["git", "diff", "--quiet", "HEAD"], check=False).returncode:
            commit += " with uncommitted changes"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return [
        f"{os.cpu_count()} cores, {cpu}, {memory:.0f} GiB",
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
        f"commit {commit}",
    ]


def render(rows: Sequence[Row], *, machine_lines: Sequence[str], command: str, when: str) -> str:
    """The generated part of `docs/benchmarks.md`, markers included."""
    out = [BEGIN, "", f"Measured {when} by `{command}` on:", ""]
    out += [f"- {line}" for line in machine_lines]
    out += ["", "| figure | result | bar | met |", "|---|---|---|---|"]
    out += [f"| {r.figure} | {r.result} | {r.bar} | {'yes' if r.met else '**no**'} |" for r in rows]
    for row in rows:
        out += ["", f"### {row.figure}", "", *row.details]
    out += ["", END]
    return "\n".join(out) + "\n"


def splice(document: str, generated: str) -> str:
    """`document` with its generated part replaced (or added at its end)."""
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        return document.rstrip("\n") + "\n\n" + generated
    after = document[end + len(END) :].lstrip("\n")
    return document[:start] + generated + ("\n" + after if after else "")
