"""The sandbox `shell` and `run_cell` run in: bubblewrap (`bwrap`), with a control group and
resource limits around it (docs/security.md, "The sandbox").

Inside: the system read-only (`/usr` and its links, the few files of `/etc` a shell and
Python need), the workspace read-write at `/workspace` (the working folder), a fresh `/tmp`
and home (`/home/user`), each a tmpfs of `tmp_bytes`; a new user (uid 1000, every capability
dropped, no further user namespaces), pid, network (loopback only), IPC, UTS and cgroup
namespace; its own session (`--new-session`: no terminal to push keys into); ended with
brokerd (`--die-with-parent`); an environment of six fixed variables.

Around it: a cgroup of `processes` and `memory` (`cgroups.py`), which every process of the run
joins before `bwrap` starts (a two-line `sh` writes its pid, then execs), and `prlimit`'s
limits on CPU seconds, open files and the largest file written. Where no cgroup can be made
the limits fall back to `RLIMIT_NPROC` and `RLIMIT_DATA`; as root those do not bind (or break
runtimes), so a root brokerd without a cgroup has no sandbox: it fails closed.

`find_sandbox` says what this machine gives, tried by running `true` inside.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import trio
from attrs import frozen

from ..proto import FailedResponse
from .cgroups import Cgroup, CgroupTree, find_cgroups
from .spawn import Child, spawn

__all__ = ["COMMAND", "ENVIRONMENT", "WORKDIR", "Reach", "Run", "Sandbox", "SandboxLimits",
           "find_sandbox"]  # fmt: skip

log = logging.getLogger("brokerd")

WORKDIR = "/workspace"  # where the workspace is inside
HOME = "/home/user"
ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": HOME,
    "USER": "user",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "TMPDIR": "/tmp",
}
_SEARCH_PATH = "/usr/bin:/bin:/usr/local/bin:/usr/sbin:/sbin"
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
        "/etc/localtime", "/etc/nsswitch.conf", "/etc/hosts", "/etc/python3*")  # fmt: skip
# Joins each cgroup named (the count first), then becomes the rest of its arguments.
_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ >"$1" || exit 126; shift; n=$((n-1)); done; exec "$@"'  # noqa: E501


@frozen
class SandboxLimits:
    """What one run may use (`[sandbox]` in config.toml)."""

    cpu_s: int = 60  # CPU seconds of each process
    memory_bytes: int = 512 * 1024**2  # the whole run's memory, its tmpfs pages counted in
    processes: int = 64  # at once, the whole run
    open_files: int = 256  # each process
    file_bytes: int = 256 * 1024**2  # the largest file a process may write
    tmp_bytes: int = 256 * 1024**2  # /tmp and the home, each
    output_bytes: int = 16 * 1024**2  # printed, before the run is stopped
    concurrency: int = 4  # runs at once; more wait their turn


@frozen
class Reach:
    """What a long-lived run (an MCP server) may get beyond a command's: folders bound
    read-only at their own paths (where it is installed), the host's network, more environment,
    and no limit on CPU seconds (it lives as long as brokerd)."""

    read: tuple[Path, ...] = ()
    network: bool = False
    env: tuple[tuple[str, str], ...] = ()
    cpu_limited: bool = True  # the limits' CPU seconds bind it


COMMAND = Reach()  # a command's: nothing more


@frozen
class Run:
    """A started run: the process (the outermost `sh`, then `bwrap`) and its group."""

    process: Child
    group: Cgroup | None
    confined: bool = True  # inside bwrap (else `process` is the command itself)


@frozen
class Sandbox:
    """What this machine gives: `bwrap` (None: no sandbox; see `reason`), where the runs'
    groups go, and the system's `python3` for `run_cell` (None when it has none)."""

    workspace: Path
    limits: SandboxLimits
    bwrap: str | None
    cgroups: CgroupTree | None
    python: str | None
    reason: str  # "bubblewrap 0.8.0; cgroup v1" or why there is no sandbox
    disable_userns: bool = True

    @property
    def working(self) -> bool:
        return self.bwrap is not None

    def argv(
        self,
        command: Sequence[str],
        group: Cgroup | None,
        confined: bool = True,
        reach: Reach = COMMAND,
    ) -> list[str]:
        """The whole command line of a run of `command` (inside bwrap unless not `confined`)."""
        limits = self.limits
        cpu = limits.cpu_s if reach.cpu_limited else "unlimited"
        prlimit = [
            shutil.which("prlimit", path=_SEARCH_PATH) or "prlimit",
            f"--cpu={cpu}",
            f"--nofile={limits.open_files}",
            f"--fsize={limits.file_bytes}",
            "--core=0",
        ]
        if group is None:  # binds only a brokerd that is not root; else there is no sandbox
            prlimit += [f"--nproc={limits.processes}", f"--data={limits.memory_bytes}"]
        inner = list(command)
        if confined and self.bwrap is not None:
            inner = [*self._bwrap(reach), "--", *inner]
        procs = [str(p) for p in group.procs] if group is not None else []
        return ["/bin/sh", "-c", _JOIN, "sh", str(len(procs)), *procs, *prlimit, "--", *inner]

    def _bwrap(self, reach: Reach) -> list[str]:
        assert self.bwrap is not None
        size = str(self.limits.tmp_bytes)
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000"]
        args += ["--share-net"] if reach.network else []
        args += ["--disable-userns"] if self.disable_userns else []
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "box"]
        args += ["--ro-bind", "/usr", "/usr"]
        for link in _SYSTEM_LINKS:
            if os.path.islink(link):
                args += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                args += ["--ro-bind", link, link]
        for pattern in _ETC:
            for path in sorted(glob.glob(pattern)):
                args += ["--ro-bind", path, path]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", HOME]
        args += ["--bind", str(self.workspace), WORKDIR, "--chdir", WORKDIR]
        for folder in reach.read:
            args += ["--ro-bind", str(folder), str(folder)]
        return [*args, "--remount-ro", "/"]  # bwrap's own root tmpfs: no write lands there

    @contextlib.asynccontextmanager
    async def running(
        self,
        command: Sequence[str],
        *,
        stdin_pipe: bool = False,
        confined: bool = True,
        reach: Reach = COMMAND,
        stderr_pipe: bool = False,
        cwd: Path | None = None,
    ) -> AsyncIterator[Run]:
        """Start `command` in the sandbox (stdout and stderr one pipe unless `stderr_pipe`); on
        leaving, whatever is left of it is killed, every process of its group, and the group
        removed. `cwd` is where an unconfined run starts (else the workspace).

        Raises:
            OSError: the group cannot be made, or the process cannot start.
        """
        group = None
        if self.cgroups is not None:
            limits = self.limits
            group = self.cgroups.make(pids=limits.processes + 2, memory=limits.memory_bytes)
        try:
            argv = self.argv(command, group, confined, reach)
            env = {**ENVIRONMENT, **dict(reach.env)}
            process = spawn(argv, stdin_pipe=stdin_pipe, env=env, cwd=cwd or self.workspace,
                            stderr_pipe=stderr_pipe)  # fmt: skip
        except BaseException:
            if group is not None:
                group.remove()
            raise
        try:
            yield Run(process, group, confined and self.bwrap is not None)
        finally:
            with trio.CancelScope(shield=True):
                await _end(process, group)


async def _end(process: Child, group: Cgroup | None) -> None:
    """Kill the run and everything it started: the outer process's group (bwrap's pid
    namespace dies with it), then every process left in the cgroup; then remove the cgroup."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, 9)
    if group is not None:
        group.kill()
    with trio.move_on_after(5):
        await process.wait()
    for stream in process.pipes:
        await stream.aclose()
    if group is None:
        return
    for _try in range(500):  # the namespace's last zombies are reaped by the kernel's init
        if group.remove():
            return
        await trio.sleep(0.01)
    log.warning("cannot remove %s: processes are still in it", group.folders[0])


@contextlib.asynccontextmanager
async def slot(limiter: trio.CapacityLimiter, wait: float) -> AsyncIterator[bool]:
    """One of `limiter`'s tokens for the block, waited for at most `wait` seconds (a call
    must leave loopd's call timeout room to run); False when none came in time."""
    got = False
    with trio.move_on_after(wait):
        await limiter.acquire()
        got = True
    try:
        yield got
    finally:
        if got:
            limiter.release()


def busy(limiter: trio.CapacityLimiter, wait: float) -> FailedResponse:
    return FailedResponse(f"not run: all {limiter.total_tokens} of the sandbox's runs stayed "
                          f"busy for {wait:g} s; try again later")  # fmt: skip


def kill_strays(run: Run) -> None:
    """SIGKILL every process of `run`'s group but its command and the two bwrap processes
    above it: what a persistent command (an interpreter) started and left running. Inside
    bwrap, the outer process (`run.process`) has one child, the namespace's init; the command
    is init's oldest child, and orphans are reparented to init."""
    if run.group is None:
        return
    parents: dict[int, tuple[int, int]] = {}  # pid: (parent, start time)
    for pid in run.group.pids():
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            parents[pid] = (int(fields[1]), int(fields[19]))
    keep = [run.process.pid]
    for _level in range(2 if run.confined else 0):
        below = sorted((start, pid) for pid, (up, start) in parents.items() if up == keep[-1])
        keep += [pid for _start, pid in below[:1]]
    for pid in set(parents) - set(keep):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)


def find_sandbox(workspace: Path, limits: SandboxLimits) -> Sandbox:
    """The sandbox this machine gives, checked by running `true` in it; or, with `bwrap`
    None, why there is none (missing, user namespaces off, root without a cgroup)."""
    python = shutil.which("python3", path="/usr/bin:/bin") or None
    tree = find_cgroups()
    cgroups = tree if isinstance(tree, CgroupTree) else None
    unbound = f"no cgroup ({tree})" if isinstance(tree, str) else f"cgroup {tree.kind}"

    def without(reason: str) -> Sandbox:
        return Sandbox(workspace, limits, None, cgroups, python, reason)

    bwrap = shutil.which("bwrap", path=_SEARCH_PATH)
    if bwrap is None:
        return without("bubblewrap (bwrap) is not installed: apt install bubblewrap")
    if shutil.which("prlimit", path=_SEARCH_PATH) is None:
        return without("prlimit (util-linux) is not installed")
    if cgroups is None and os.geteuid() == 0:
        return without(
            f"brokerd runs as root and can make no cgroup ({tree}): nothing would bound the "
            "processes and memory of a command"
        )
    try:
        shown = subprocess.run([bwrap, "--version"], capture_output=True, timeout=10, check=False)
        help_text = subprocess.run([bwrap, "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return without(f"{bwrap} does not run: {error}")
    version = shown.stdout.decode(errors="replace").strip() or "bubblewrap"
    sandbox = Sandbox(workspace, limits, bwrap, cgroups, python, f"{version}; {unbound}",
                      disable_userns=b"--disable-userns" in help_text.stdout)  # fmt: skip
    group = None
    try:
        if cgroups is not None:
            group = cgroups.make(pids=8, memory=limits.memory_bytes)
        tried = subprocess.run(
            sandbox.argv(["/bin/true"], group), capture_output=True, timeout=30, check=False,
            env=ENVIRONMENT, cwd=workspace, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        return without(f"bubblewrap does not start here: {error}")
    finally:
        for _try in range(500 if group is not None else 0):  # its zombies, reaped by init
            if group is not None and group.remove():
                break
            time.sleep(0.01)
    if tried.returncode != 0:
        said = tried.stdout.decode(errors="replace").strip().splitlines()[-1:] or ["no word"]
        hint = " (are user namespaces off? see kernel.unprivileged_userns_clone)"
        return without(f"bubblewrap fails here: {said[0]}{hint if 'namespace' in said[0] else ''}")
    return sandbox
