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

__all__ = [
    "BEGIN",
    "END",
    "PART_BEGIN",
    "PART_END",
    "Row",
    "cpu_ticks",
    "machine",
    "render",
    "splice",
    "steal_line",
]

BEGIN = "<!-- make bench writes from here -->"
END = "<!-- to here -->"
# Some rows alone (`make bench ROWS=...`) go in a part of their own above the full run's,
# which they leave as it was: a table never mixes runs of other commits or machines.
PART_BEGIN = "<!-- make bench ROWS=... writes from here -->"
PART_END = "<!-- to here (rows) -->"


@frozen
class Row:
    """One row of SPEC section 12: the figure in a line, its bar, whether it is met, and the
    measurements behind it (markdown lines)."""

    figure: str
    result: str
    bar: str
    met: bool
    details: tuple[str, ...] = ()


def cpu_ticks() -> tuple[int, int] | None:
    """The machine's CPU time so far in clock ticks: all of it, and what the hypervisor took
    (`steal`, `/proc/stat`); None where the system does not say."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(field) for field in fields]
    except (OSError, ValueError, IndexError):
        return None
    return sum(ticks[:8]), ticks[7] if len(ticks) > 7 else 0


def steal_line(before: tuple[int, int] | None, after: tuple[int, int] | None) -> list[str]:
    """A line on how much of the CPU the hypervisor took during the run, where it was read:
    on a virtual machine a busy host slows every figure, the CPU times too."""
    if before is None or after is None or after[0] <= before[0]:
        return []
    share = (after[1] - before[1]) / (after[0] - before[0]) * 100
    return [f"steal during the run (the CPU time the hypervisor took): {share:.0f}%"]


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


def render(
    rows: Sequence[Row],
    *,
    machine_lines: Sequence[str],
    command: str,
    when: str,
    partial: bool = False,
) -> str:
    """The generated part of `docs/benchmarks.md`, markers included; `partial`: some rows
    alone, for the part above the full run's."""
    begin, end = (PART_BEGIN, PART_END) if partial else (BEGIN, END)
    out = [begin, ""]
    if partial:
        out += ["## Rows measured again since the full run below", ""]
    out += [f"Measured {when} by `{command}` on:", ""]
    out += [f"- {line}" for line in machine_lines]
    out += ["", "| figure | result | bar | met |", "|---|---|---|---|"]
    out += [f"| {r.figure} | {r.result} | {r.bar} | {'yes' if r.met else '**no**'} |" for r in rows]
    for row in rows:
        out += ["", f"### {row.figure}", "", *row.details]
    out += ["", end]
    return "\n".join(out) + "\n"


def splice(document: str, generated: str) -> str:
    """`document` with its generated part replaced (or added at its end). A full run's
    replaces the full run's part and drops the rows' part; a rows' part replaces the one
    before it, or goes just above the full run's."""
    if generated.startswith(PART_BEGIN):
        document, at = _cut(document, PART_BEGIN, PART_END)
        at = document.find(BEGIN) if at is None else at
        if at < 0:
            return document.rstrip("\n") + "\n\n" + generated
        return document[:at] + generated + "\n" + document[at:]
    document, _ = _cut(document, PART_BEGIN, PART_END)
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        return document.rstrip("\n") + "\n\n" + generated
    after = document[end + len(END) :].lstrip("\n")
    return document[:start] + generated + ("\n" + after if after else "")


def _cut(document: str, begin: str, end: str) -> tuple[str, int | None]:
    """`document` without the part between the markers (and the blank line after it), and
    where that part was (None: it had none)."""
    start, stop = document.find(begin), document.find(end)
    if start < 0 or stop < start:
        return document, None
    after = document[stop + len(end) :].lstrip("\n")
    return document[:start] + after, start
