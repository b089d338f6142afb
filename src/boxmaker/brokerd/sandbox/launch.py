"""The command line of a sandboxed run: a chain of small programs, each doing one thing and
then becoming the next (exec), so that what the model wrote starts last, with nothing left of
brokerd's authority. Pure: `sandbox/bwrap.py` holds the folders and starts the line.

    sh (join the run's cgroup)                            as brokerd's user
    unshare --mount, sh (stage the folders)               root only: see below
    setpriv (the sandbox's user; no capability, no new privileges)
    prlimit (CPU seconds, open files, a file's size, no core)
    bwrap (namespaces, the system read-only, the folders) confined runs only
    the command

Root. A process that brokerd starts as root would run as host root: inside bwrap it looks like
uid 1000, but a file it writes, a `/proc/sys` setting or a device node would take host root's
rights. So under root every run becomes the sandbox's own user first (`[sandbox] user`), and
bwrap runs as that user, unprivileged. That user cannot reach the workspace through the owner's
folders (`/root` is 0700), and no folder is opened wider for it: instead, in a mount namespace
of the run's own (gone with it), root mounts a small tmpfs over an empty system folder that
holds none of them (`stage`, e.g. `/mnt`), binds each folder the run is shown there (`/mnt/0`,
`/mnt/1`, ...), checks each is the folder it must be (device and inode), and only then becomes
the sandbox's user, whose bwrap binds them from there. Under another user, brokerd's own
descriptors go to bwrap (`--bind-fd`), which checks them the same way.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from attrs import frozen

from .mounts import Access, Mount

__all__ = ["STAGES", "Chain", "Limits", "Tools", "argv_of", "stage_script"]

# Where root may stage a run's folders, in the run's own mount namespace: the first of these
# that exists and holds none of them (the tmpfs hides what is beneath, there only).
STAGES = ("/mnt", "/media", "/srv", "/opt", "/var/tmp", "/tmp")
_STAGED = 125  # the stage's exit status when a folder is not what it must be
# Joins each cgroup named (the count first), then becomes the rest of its arguments.
_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ >"$1" || exit 126; shift; n=$((n-1)); done; exec "$@"'  # noqa: E501


@frozen
class Tools:
    """The programs of the chain, found on the machine (absolute paths)."""

    prlimit: str
    setpriv: str
    bwrap: str | None = None
    unshare: str | None = None  # root only, with mount, mkdir and stat
    mount: str | None = None
    mkdir: str | None = None
    stat: str | None = None


@frozen
class Limits:
    """A run's `prlimit` limits: `cpu_s` None is unlimited; `processes` and `memory_bytes`
    are set only where no cgroup binds them (`processes` inside bwrap only: outside, a user's
    limit counts all of the user's processes, so a run outside the sandbox and without a
    cgroup has no bound on its number of processes)."""

    cpu_s: int | None
    open_files: int
    file_bytes: int
    processes: int | None = None
    memory_bytes: int | None = None


@frozen
class Chain:
    """One run's line: `user` is the sandbox's (uid, gid) when brokerd is root, else None;
    `bwrap` its namespace and system arguments (the folders are added here), None for a run
    outside the sandbox."""

    tools: Tools
    limits: Limits
    cgroup_procs: tuple[str, ...]
    user: tuple[int, int] | None
    bwrap: tuple[str, ...] | None
    stage: str = STAGES[0]  # under root: where its folders are staged


def stage_script(tools: Tools, stage: str, paths: Sequence[str], identities: Sequence[str]) -> str:
    """The root's stage: a tmpfs over `stage`, each folder bound at `<stage>/<n>` by its path,
    each checked to be `identities[n]` ("dev:ino"); then it becomes its arguments."""
    mount, mkdir, stat = tools.mount, tools.mkdir, tools.stat
    assert mount is not None
    assert mkdir is not None
    assert stat is not None
    staged = [f"{stage}/{n}" for n in range(len(paths))]
    binds = " && ".join(
        f"{mount} --bind {shlex.quote(path)} {at}" for path, at in zip(paths, staged, strict=True)
    )
    expected = shlex.quote("\n".join(identities))
    fail = f"{{ echo 'bx-stage: a folder is not the one it was' >&2; exit {_STAGED}; }}"
    tmpfs = "-t tmpfs -o mode=0755,size=64k,nosuid,nodev,noexec bx-stage"
    return "\n".join(
        [
            f"{mount} {tmpfs} {stage} || exit {_STAGED}",
            f"{mkdir} {' '.join(staged)} && {binds} || exit {_STAGED}",
            f'[ "$({stat} -c %d:%i {" ".join(staged)})" = {expected} ] || {fail}',
            'exec "$@"',
        ]
    )


def _bind(access: Access, source: list[str], dest: str) -> list[str]:
    """bwrap's arguments for one mount (`source`: `["--bind-fd", N]`'s or a path's words)."""
    kind, *what = source
    ro = "--ro-" + kind[2:]
    if access is Access.WRITE:
        return [kind, *what, dest]
    if access is Access.READ:
        return [ro, *what, dest]
    return [ro, *what, dest, "--size", "4096", "--tmpfs", dest, "--remount-ro", dest]


def argv_of(
    chain: Chain,
    command: Sequence[str],
    mounts: Sequence[Mount] = (),
    held: Sequence[tuple[str, int, str]] = (),
    data: Sequence[tuple[int, str]] = (),
    chdir: str | None = None,
) -> list[str]:
    """The whole line of a run of `command`. `held` gives, for each of `mounts`, its host
    path, its descriptor and its identity ("dev:ino"); `data` descriptors to read files from
    (`--ro-bind-data`, e.g. `/etc/passwd`); `chdir` where the command starts inside."""
    tools, limits = chain.tools, chain.limits
    cpu = limits.cpu_s or "unlimited"
    prlimit = [
        tools.prlimit,
        f"--cpu={cpu}",
        f"--nofile={limits.open_files}",
        f"--fsize={limits.file_bytes}",
        "--core=0",
    ]
    if limits.memory_bytes is not None:
        prlimit.append(f"--data={limits.memory_bytes}")
    setpriv = [tools.setpriv]
    if chain.user is not None:
        uid, gid = chain.user
        setpriv += [f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--bounding-set=-all"]
    setpriv += ["--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs"]
    inner = [*setpriv, "--", *prlimit, "--"]
    staged: list[str] = []
    if chain.bwrap is not None:
        binds: list[str] = []
        for n, (mount, (path, fd, _identity)) in enumerate(zip(mounts, held, strict=True)):
            source = [f"{chain.stage}/{n}"] if chain.user is not None else [str(fd)]
            kind = "--bind" if chain.user is not None else "--bind-fd"
            binds += _bind(mount.access, [kind, *source], mount.dest)
            staged.append(path)
        for fd, dest in data:
            binds += ["--ro-bind-data", str(fd), dest]
        if chdir is not None:
            binds += ["--chdir", chdir]
        inner += [*chain.bwrap, *binds, "--remount-ro", "/", "--"]
        if limits.processes is not None:
            # Inside its own user namespace the count is the run's alone; set before bwrap,
            # every process of the user (brokerd's threads, the other runs) would count.
            inner += [tools.prlimit, f"--nproc={limits.processes}", "--"]
    inner += list(command)
    if chain.user is not None and staged:
        assert tools.unshare is not None
        identities = [identity for _path, _fd, identity in held]
        script = stage_script(tools, chain.stage, staged, identities)
        inner = [
            tools.unshare,
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            script,
            "sh",
            *inner,
        ]
    procs = chain.cgroup_procs
    return ["/bin/sh", "-c", _JOIN, "sh", str(len(procs)), *procs, *inner]
