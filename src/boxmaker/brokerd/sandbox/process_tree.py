"""A run's processes, as the host sees them in `/proc`: the tree below a run's first process,
who each runs as, how much CPU they took, and what a persistent command (an interpreter) left
behind. Blocking reads of `/proc`, each a few microseconds a process.

A sandboxed run is, from the host: its first process (`sh`, then ... then the outer `bwrap`),
whose one child is the namespace's init, whose oldest child is the command. Whatever the
command starts stays below init (orphans are reparented to it: it is the pid namespace's
init), so the tree from the first process holds all of it, with or without a cgroup.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from attrs import frozen

__all__ = [
    "Leftovers",
    "Tree",
    "Who",
    "cpu_seconds",
    "kill_all",
    "leftovers",
    "state_of",
    "threads_of",
    "tree_of",
    "who",
]

_TICK = os.sysconf("SC_CLK_TCK")


@frozen
class Who:
    """Whom a process runs as, as the host sees it: real, effective, saved and file-system
    uid; its effective, permitted, bounding and ambient capabilities (hex masks)."""

    uids: tuple[int, ...]
    capabilities: dict[str, int]

    @property
    def root(self) -> bool:
        return 0 in self.uids

    @property
    def capable(self) -> bool:
        """Whether it holds any capability it could use (the bounding set only limits)."""
        return any(self.capabilities.get(key, 0) for key in ("CapEff", "CapPrm", "CapAmb"))


def who(pid: int) -> Who:
    """Raises OSError when the process is gone."""
    uids: tuple[int, ...] = ()
    caps: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "Uid":
            uids = tuple(int(word) for word in value.split())
        elif key.startswith("Cap"):
            caps[key] = int(value.strip(), 16)
    return Who(uids, caps)


@frozen
class Tree:
    """The processes below (and with) a first one: each one's parent, start time (clock
    ticks since boot) and CPU ticks (its own and its reaped children's)."""

    first: int
    parents: dict[int, int]
    starts: dict[int, int]
    ticks: dict[int, int]

    def children(self, pid: int) -> list[int]:
        """`pid`'s children, the oldest first."""
        below = [child for child, parent in self.parents.items() if parent == pid]
        return sorted(below, key=lambda child: (self.starts.get(child, 0), child))

    def path(self, depth: int) -> list[int]:
        """The first process, then its oldest child, and so on, `depth` levels down."""
        chain = [self.first]
        for _level in range(depth):
            below = self.children(chain[-1])
            if not below:
                break
            chain.append(below[0])
        return chain

    def cpu_seconds(self) -> float:
        return sum(self.ticks.values()) / _TICK


def tree_of(first: int, among: set[int] | None = None) -> Tree:
    """The tree below `first`, read from `/proc` (`among`: only these pids are looked at, as a
    cgroup's; else every process of the host)."""
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    ticks: dict[int, int] = {}
    pids = (
        among
        if among is not None
        else {int(name) for name in os.listdir("/proc") if name.isdigit()}
    )
    for pid in pids | {first}:
        with contextlib.suppress(OSError, ValueError, IndexError):  # ended meanwhile
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            parents[pid] = int(fields[1])
            starts[pid] = int(fields[19])
            ticks[pid] = sum(int(field) for field in fields[11:15])  # utime to cstime
    below, grew = {first}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in below} - below
        grew = bool(more)
        below |= more
    return Tree(
        first,
        {pid: parents[pid] for pid in below if pid in parents and pid != first},
        {pid: starts[pid] for pid in below if pid in starts},
        {pid: ticks[pid] for pid in below if pid in ticks},
    )


def cpu_seconds(first: int, among: set[int] | None = None) -> float:
    """CPU seconds of `first` and every process below it, with their reaped children's."""
    return tree_of(first, among).cpu_seconds()


def kill_all(pids: set[int] | list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def state_of(pid: int) -> str:
    """Its state letter in `/proc/<pid>/stat` (R, S, T, Z, ...), "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def threads_of(pid: int) -> int:
    """How many threads `pid` has (0: it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


@frozen
class Leftovers:
    """What a persistent command left running after its work: `command` is its pid (None:
    it is gone), `processes` every other process below the run's first but the chain down to
    the command, `threads` its threads beyond the first."""

    command: int | None
    processes: list[int]
    threads: int

    def __bool__(self) -> bool:
        return bool(self.processes or self.threads)

    def said(self) -> str:
        parts = []
        if self.processes:
            parts.append(f"{len(self.processes)} process{'es' * (len(self.processes) > 1)}")
        if self.threads:
            parts.append(f"{self.threads} thread{'s' * (self.threads > 1)}")
        return " and ".join(parts)


def leftovers(first: int, depth: int, among: set[int] | None = None) -> Leftovers:
    """What is left below `first` besides the chain down to its command, `depth` levels
    down (2 inside bwrap: its init, then the command; 0 when `first` is the command)."""
    tree = tree_of(first, among)
    chain = tree.path(depth)
    command = chain[depth] if len(chain) == depth + 1 else None
    others = [pid for pid in tree.parents if pid not in chain]
    threads = max(0, threads_of(command) - 1) if command is not None else 0
    return Leftovers(command, others, threads)
