"""The sandbox `shell` and `run_cell` run in: bubblewrap (`bwrap`), with a control group and
resource limits around it (docs/security.md, "The sandbox").

Inside: the system read-only (`/usr` and its links, the few files of `/etc` a shell and
Python need, `/etc/passwd`, `group` and `hosts` of its own, `/proc/sys`), the workspace
read-write at `/workspace` (the working folder; the roots inside it kept to their rules,
`mounts.py`), a fresh `/tmp` and home (`/home/user`), each a tmpfs of `tmp_bytes`; a new user
(uid 1000, every capability dropped, no further user namespaces), pid, network (loopback
only), IPC, UTS and cgroup namespace; its own session (`--new-session`: no terminal to push
keys into); ended with brokerd (`--die-with-parent`); an environment of six fixed variables.

Outside, a run is never host root: under root it is the sandbox's user (`[sandbox] user`),
with no capability, in and out of bwrap alike (`launch.py` writes the line).

Around it: a cgroup of `processes` and `memory` (`cgroups.py`), which every process of the run
joins before anything else starts, and `prlimit`'s limits on CPU seconds, open files and the
largest file written. Where no cgroup can be made the limits fall back to `RLIMIT_NPROC` and
`RLIMIT_DATA`; a root brokerd without a cgroup has no sandbox: it fails closed.

`probe.find_sandbox` says what this machine gives, tried by running a command inside.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path, PurePosixPath

import trio
from attrs import frozen

from ...config import SandboxConfig
from ...proto import DataClass
from ..files.roots import Root, written
from .cgroups import Cgroup, CgroupTree
from .holding import hold, pick_stage, release
from .launch import STAGES, Chain, Limits, Tools, argv_of
from .mounts import Access, Shown, plan
from .ownership import sweep_setuid
from .process_tree import kill_all, state_of, tree_of
from .spawn import Child, spawn

__all__ = ["COMMAND", "ENVIRONMENT", "WORKDIR", "Reach", "Run", "Sandbox", "SandboxLimits"]

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
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/python3*",
)
_ETC_FILES = (
    (f"root:x:0:0::/:/usr/sbin/nologin\nuser:x:1000:1000:user:{HOME}:/bin/bash\n", "/etc/passwd"),
    ("root:x:0:\nuser:x:1000:\n", "/etc/group"),
    ("127.0.0.1\tlocalhost box\n::1\tlocalhost ip6-localhost ip6-loopback\n", "/etc/hosts"),
)
SWEEP_S = 30.0  # the most a call waits for the set-uid sweep of the workspace


@frozen
class SandboxLimits:
    """What one run may use: `[sandbox]` in config.toml (`SandboxConfig`, which holds every
    default; `SandboxLimits.of(SandboxConfig())` is what a config that sets none gives), in
    bytes."""

    cpu_s: int  # CPU seconds of each process
    memory_bytes: int  # the whole run's memory, its tmpfs pages counted in
    processes: int  # at once, the whole run
    open_files: int  # each process
    file_bytes: int  # the largest file a process may write
    tmp_bytes: int  # /tmp and the home, each
    output_bytes: int  # printed, before the run is stopped
    concurrency: int  # runs at once; more wait their turn

    @classmethod
    def of(cls, box: SandboxConfig) -> SandboxLimits:
        """The `[sandbox]` keys as a run's limits."""
        mb = 1024**2
        return cls(
            cpu_s=box.cpu_s,
            memory_bytes=box.memory_mb * mb,
            processes=box.processes,
            open_files=box.open_files,
            file_bytes=box.file_mb * mb,
            tmp_bytes=box.tmp_mb * mb,
            output_bytes=box.output_mb * mb,
            concurrency=box.concurrency,
        )


@frozen
class Reach:
    """What a long-lived run (an MCP server) may get beyond a command's: folders bound
    read-only at their own paths (where it is installed), the host's network, more environment,
    no limit on CPU seconds (it lives as long as brokerd), and where it starts inside: not in
    the workspace, whose files a command may have planted for it to import."""

    read: tuple[Path, ...] = ()
    network: bool = False
    env: tuple[tuple[str, str], ...] = ()
    cpu_limited: bool = True  # the limits' CPU seconds bind it
    workdir: str = WORKDIR


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
    groups go, the system's `python3` for `run_cell` (None when it has none), the sandbox's
    user under root (`user`), the roots the policy grants (the workspace's first: what a run
    is shown of them is kept to their rules, `mounts.py`), the chain's programs (`tools`;
    None: no run can start), and the host uid a run was seen to have (`host_uid`)."""

    workspace: Path
    limits: SandboxLimits
    bwrap: str | None
    cgroups: CgroupTree | None
    python: str | None
    reason: str  # "bubblewrap 0.8.0; cgroup v1" or why there is no sandbox
    disable_userns: bool = True
    user: tuple[int, int] | None = None  # (uid, gid) runs become; None: brokerd is not root
    roots: tuple[Root, ...] = ()
    tools: Tools | None = None
    host_uid: int | None = None

    @property
    def working(self) -> bool:
        return self.bwrap is not None

    def workspace_root(self) -> Root:
        if self.roots:
            return self.roots[0]
        return Root("workspace", PurePosixPath(self.workspace), True, True, DataClass.PRIVATE)

    async def sweep(self) -> str:
        """Clear every set-uid and set-gid bit a run left on a file of the workspace (and make
        the workspace its user's alone again, 0700): a line saying where, or "" (what cannot be
        looked at is logged, never raised). At most `SWEEP_S`, whatever cancels."""
        sandboxed = written([self.workspace_root(), *self.roots[1:]])
        owner = self.user[0] if self.user is not None else os.geteuid()
        tops = [str(top) for top in sandboxed.tops]
        with trio.CancelScope(shield=True), trio.move_on_after(SWEEP_S) as late:
            try:
                swept = await trio.to_thread.run_sync(
                    lambda: sweep_setuid(str(self.workspace), owner, sandboxed.keep, tops),
                    abandon_on_cancel=True,
                )
            except OSError as error:
                log.warning("cannot look for set-uid files in %s: %s", self.workspace, error)
                return ""
        if late.cancelled_caught:
            log.warning(
                "the set-uid sweep of %s took over %g s: left to finish", self.workspace, SWEEP_S
            )
            return ""
        said = ""
        if swept.cleared:
            log.warning("set-uid or set-gid bits cleared on %d files", len(swept.cleared))
            said += (
                f"[set-uid and set-gid bits are never kept in the workspace: cleared on "
                f"{_few(swept.cleared)}]\n"
            )
        if swept.missed:
            log.warning(
                "set-uid files of the workspace changed under the sweep: %s", _few(swept.missed)
            )
            said += (
                f"[set-uid files changed while they were swept, and were not: "
                f"{_few(swept.missed)}; the next call's sweep looks again]\n"
            )
        return said

    def shown(self, reach: Reach = COMMAND) -> list[Shown]:
        """The folders a run is shown: the workspace, then `reach.read` read-only."""
        workspace = self.workspace_root()
        shown = [Shown(workspace.path, WORKDIR, Access.WRITE, workspace.identity, "the workspace")]
        shown += [
            Shown(PurePosixPath(folder), str(folder), Access.READ, None, f"the folder {folder}")
            for folder in reach.read
        ]
        return shown

    def chain(self, group: Cgroup | None, reach: Reach, confined: bool) -> Chain:
        """The programs of a run, its limits, and (`confined`) bwrap's own arguments."""
        if self.tools is None:
            raise OSError(self.reason)
        if os.geteuid() == 0 and self.user is None:
            raise OSError("brokerd runs as root and has no sandbox user: nothing runs as root")
        limits = self.limits
        unbound = group is None  # then RLIMIT_NPROC and RLIMIT_DATA bound it (not as root)
        bounds = Limits(
            limits.cpu_s if reach.cpu_limited else None,
            limits.open_files,
            limits.file_bytes,
            limits.processes if unbound else None,
            limits.memory_bytes if unbound else None,
        )
        procs = tuple(str(path) for path in group.procs) if group is not None else ()
        bwrap = tuple(self._bwrap(reach)) if confined and self.bwrap is not None else None
        stage = STAGES[0]
        if self.user is not None and bwrap is not None:
            stage = pick_stage([folder.path for folder in self.shown(reach)])
        return Chain(self.tools, bounds, procs, self.user, bwrap, stage)

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
        # The kernel's settings are read-only whoever the run is (bwrap covers them only
        # where it finds them writable); /dev holds the standard few nodes.
        args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
        # The host's boot line says how it was started (and sometimes more): not shown.
        args += ["--ro-bind", "/dev/null", "/proc/cmdline"]
        tmpfs = ("/tmp", HOME, "/dev/shm")  # each of `tmp_bytes` (bwrap's /dev/shm has no size)
        return args + [word for path in tmpfs for word in ("--size", size, "--tmpfs", path)]

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
            OSError: the group cannot be made, a folder the run is shown is not the one it
                was (`NotShown`), or the process cannot start.
        """
        confined = confined and self.bwrap is not None
        group = None
        if self.cgroups is not None:
            limits = self.limits
            group = self.cgroups.make(pids=limits.processes + 2, memory=limits.memory_bytes)
        held: list[tuple[str, int, str]] = []
        data: list[tuple[int, str]] = []
        try:
            chain = self.chain(group, reach, confined)
            mounts = plan(self.shown(reach), self.roots) if confined else []
            held = hold(mounts, self.shown(reach))
            data = _etc_data() if confined else []
            argv = argv_of(chain, command, mounts, held, data, reach.workdir)
            fds = [fd for _path, fd, _identity in held] if self.user is None else []
            env = {**ENVIRONMENT, **dict(reach.env)}
            where = Path("/") if confined else cwd or self.workspace
            fds += [fd for fd, _dest in data]
            process = spawn(
                argv,
                stdin_pipe=stdin_pipe,
                env=env,
                cwd=where,
                stderr_pipe=stderr_pipe,
                pass_fds=tuple(fds),
            )
        except BaseException:
            if group is not None:
                group.remove()
            release(held)
            raise
        finally:
            for fd, _dest in data:
                os.close(fd)
        try:
            yield Run(process, group, confined)
        finally:
            with trio.CancelScope(shield=True):
                await _end(process, group)
            # Held to the run's end: no folder's inode is free for another to take while the
            # run's stage (under root) checks what it bound by its device and inode.
            release(held)


def _few(paths: Sequence[str]) -> str:
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return ", ".join(paths[:5]) + more


def _etc_data() -> list[tuple[int, str]]:
    """Pipes holding the sandbox's own `/etc/passwd`, `/etc/group` and `/etc/hosts` (the
    host's would say who else uses the machine and its names), for `--ro-bind-data`."""
    data = []
    try:
        for text, dest in _ETC_FILES:
            read, write = os.pipe()
            data.append((read, dest))
            try:
                os.write(write, text.encode())  # a few dozen bytes: never blocks
            finally:
                os.close(write)
    except BaseException:
        for fd, _dest in data:
            os.close(fd)
        raise
    return data


async def _end(process: Child, group: Cgroup | None) -> None:
    """Kill the run and everything it started: every process of its cgroup, or without one,
    every process below its first (bwrap's pid namespace holds what it started), and the
    first's process group; then wait until they are gone, and remove the cgroup."""
    below = (
        {} if group is not None else (await trio.to_thread.run_sync(tree_of, process.pid)).parents
    )
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, 9)
    if group is not None:
        group.kill()
    kill_all(set(below))
    with trio.move_on_after(5):
        await process.wait()
    for stream in process.pipes:
        await stream.aclose()
    if group is None:
        for _try in range(500):  # a pid namespace's last processes go with their init
            if not any(state_of(pid) not in ("", "Z", "X") for pid in below):
                return
            await trio.sleep(0.01)
        log.warning("processes of a run are still there after 5 s: %s", sorted(below))
        return
    for _try in range(500):  # the namespace's last zombies are reaped by the kernel's init
        if group.remove():
            return
        await trio.sleep(0.01)
    log.warning("cannot remove %s: processes are still in it", group.folders[0])
