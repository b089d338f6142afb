"""A control group for each sandboxed run: its processes and its memory bounded as one, and all
of them ended at once. cgroup v1 (a `pids` and a `memory` hierarchy) or v2 (one unified
tree), whichever the machine gives brokerd a writable place in.

Why a cgroup: brokerd often runs as root (CI, many devices), where a per-user process limit
(`RLIMIT_NPROC`) does not bind and an address-space limit breaks some runtimes. A group's
`pids.max` and memory limit bind whoever the user is, count every process of the run
together, and `kill` reaches every process in it, wherever it moved to in its own pid
namespace.

Each run's group is made beneath brokerd's own group (`bx-<pid>-<n>`) and removed when the
run ends. In v2 a group with processes cannot hand controllers to its children, so brokerd
first moves itself into a leaf of its own group (`<own>/brokerd`), as container runtimes do.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from pathlib import Path

from attrs import frozen

__all__ = ["Cgroup", "CgroupTree", "find_cgroups"]

_counter = itertools.count(1)


@frozen
class Cgroup:
    """One run's group: `folders` are its directories (one per v1 hierarchy, one in v2)."""

    folders: tuple[Path, ...]

    @property
    def procs(self) -> tuple[Path, ...]:
        """The files a process writes its pid into to join the group."""
        return tuple(folder / "cgroup.procs" for folder in self.folders)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs:
            with contextlib.suppress(OSError, ValueError):
                found |= {int(line) for line in procs.read_text().split()}
        return found

    def memory_hit(self) -> bool:
        """Whether the kernel's OOM killer ended a process of the group (v2's `memory.events`,
        v1's `memory.oom_control`)."""
        for folder in self.folders:
            for name in ("memory.events", "memory.oom_control"):
                if _count(folder / name, "oom_kill"):
                    return True
        return False

    def pids_hit(self) -> bool:
        """Whether a fork was refused at `pids.max` (`pids.events`)."""
        return any(_count(folder / "pids.events", "max") for folder in self.folders)

    def kill(self) -> None:
        """SIGKILL every process in the group (v2's `cgroup.kill` too, where it exists)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                (folder / "cgroup.kill").write_text("1")
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """End what is left in the group and remove it; whether it is gone (a group whose
        last processes the kernel has not yet reaped cannot go yet)."""
        self.kill()
        gone = True
        for folder in self.folders:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        return gone


@frozen
class CgroupTree:
    """Where brokerd makes the runs' groups: `kind` is "v1" or "v2"; `parents` the folders a
    run's group goes beneath (the `pids` and `memory` hierarchies' in v1)."""

    kind: str
    parents: tuple[Path, ...]

    def make(self, pids: int, memory: int) -> Cgroup:
        """A new group of at most `pids` processes and `memory` bytes (swap counted in).

        Raises:
            OSError: the group cannot be made or limited (any part made is removed).
        """
        name = f"bx-{os.getpid()}-{next(_counter)}"
        group = Cgroup(tuple(parent / name for parent in self.parents))
        try:
            for folder in group.folders:
                folder.mkdir()
            if self.kind == "v2":
                (folder,) = group.folders
                _write(folder / "pids.max", pids)
                _write(folder / "memory.max", memory)
                with contextlib.suppress(FileNotFoundError):  # swap accounting may be off
                    _write(folder / "memory.swap.max", 0)
            else:
                pids_folder, memory_folder = group.folders
                _write(pids_folder / "pids.max", pids)
                _write(memory_folder / "memory.limit_in_bytes", memory)
                with contextlib.suppress(FileNotFoundError):
                    _write(memory_folder / "memory.memsw.limit_in_bytes", memory)
        except OSError:
            group.remove()
            raise
        return group


def _count(path: Path, key: str) -> int:
    """The count of `key` in a flat-keyed file of the group ("key N" lines); 0 if none."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            word, _, count = line.partition(" ")
            if word == key:
                return int(count)
    return 0


def _write(path: Path, value: int) -> None:
    path.write_text(str(value))


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """`/proc/self/cgroup` as {controller: path}; v2's line is under ""."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        _id, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _mounts(mountinfo: str) -> list[tuple[str, Path, str, set[str]]]:
    """The cgroup mounts: (type, mount point, root within the hierarchy, super options)."""
    found = []
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields, tails = head.split(), tail.split()
        if len(fields) >= 5 and len(tails) >= 3 and tails[0] in ("cgroup", "cgroup2"):
            point = Path(fields[4].replace("\\040", " "))
            found.append((tails[0], point, fields[3], set(tails[2].split(","))))
    return found


def _inside(point: Path, root: str, path: str) -> Path:
    """The folder of cgroup `path` in a hierarchy mounted at `point` from its `root`."""
    relative = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    return point if relative == "." else point / relative


def _v1(mounts: list[tuple[str, Path, str, set[str]]], own: dict[str, str]) -> CgroupTree | str:
    parents = []
    for controller in ("pids", "memory"):
        mount = next((m for m in mounts if m[0] == "cgroup" and controller in m[3]), None)
        if mount is None or controller not in own:
            return f"no cgroup v1 {controller} hierarchy"
        parents.append(_inside(mount[1], mount[2], own[controller]))
    return CgroupTree("v1", tuple(parents))


def _v2(mounts: list[tuple[str, Path, str, set[str]]], own: dict[str, str]) -> CgroupTree | str:
    mount = next((m for m in mounts if m[0] == "cgroup2"), None)
    if mount is None or "" not in own:
        return "no cgroup v2 tree"
    folder = _inside(mount[1], mount[2], own[""])
    try:
        controllers = (folder / "cgroup.controllers").read_text().split()
    except OSError as error:
        return f"cannot read {folder}/cgroup.controllers: {error.strerror}"
    if missing := {"pids", "memory"} - set(controllers):
        return f"cgroup v2 at {folder} lacks the {' and '.join(sorted(missing))} controllers"
    try:
        enabled = (folder / "cgroup.subtree_control").read_text().split()
        if not {"pids", "memory"} <= set(enabled):
            # No process may stay in a group that hands controllers down: brokerd moves into a
            # leaf of its own first.
            leaf = folder / "brokerd"
            leaf.mkdir(exist_ok=True)
            for pid in (folder / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    (leaf / "cgroup.procs").write_text(pid)
            (folder / "cgroup.subtree_control").write_text("+pids +memory")
    except OSError as error:
        return f"cannot delegate pids and memory beneath {folder}: {error.strerror}"
    return CgroupTree("v2", (folder,))


def find_cgroups(
    proc_cgroup: Path = Path("/proc/self/cgroup"), mountinfo: Path = Path("/proc/self/mountinfo")
) -> CgroupTree | str:
    """Where this process can make bounded groups, tried by making one; else why not."""
    try:
        own = _own_paths(proc_cgroup.read_text())
        mounts = _mounts(mountinfo.read_text())
    except OSError as error:
        return f"cannot read this process's cgroups: {error.strerror}"
    reasons = []
    for finder in (_v1, _v2):
        tree = finder(mounts, own)
        if isinstance(tree, str):
            reasons.append(tree)
            continue
        try:
            tree.make(pids=8, memory=64 * 1024**2).remove()
        except OSError as error:
            reasons.append(f"cannot make a cgroup beneath {tree.parents[0]}: {error.strerror}")
            continue
        return tree
    return "; ".join(reasons)
