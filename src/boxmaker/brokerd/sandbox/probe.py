"""What this machine gives the sandbox, found once when brokerd starts (`find_sandbox`): the
programs of a run's chain, bubblewrap, a cgroup tree, the system's `python3`, and under root
the sandbox's user; tried by running one command in it, which also says the host uid it ran
as. Where something is missing the sandbox is not working, and says why: `shell` and
`run_cell` are then denied (or asked, every call, unconfined); a run that would be host root
is never started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import attrs

from ...proto import DataClass
from ..files.roots import Root
from .bwrap import COMMAND, ENVIRONMENT, WORKDIR, Sandbox, SandboxLimits
from .cgroups import CgroupTree, find_cgroups
from .holding import hold
from .launch import Tools, argv_of
from .mounts import plan
from .ownership import sandbox_user
from .process_tree import Who, tree_of, who

__all__ = ["find_sandbox", "find_tools"]

_SEARCH_PATH = "/usr/bin:/bin:/usr/local/bin:/usr/sbin:/sbin"
_ROOT_ONLY = ("unshare", "mount", "mkdir", "stat")


def find_tools(as_root: bool) -> Tools | str:
    """The chain's programs (root's staging ones too, `as_root`), or which is missing."""
    needed = ("prlimit", "setpriv", *(_ROOT_ONLY if as_root else ()))
    found = {name: shutil.which(name, path=_SEARCH_PATH) for name in (*needed, "bwrap")}
    for name in needed:
        if found[name] is None:
            return f"{name} (util-linux) is not installed"
    return Tools(**found)


def find_sandbox(
    workspace: Path,
    limits: SandboxLimits,
    *,
    user: str = "",
    roots: Sequence[Root] = (),
) -> Sandbox:
    """The sandbox this machine gives, tried by running a command in it; or, with `bwrap`
    None, why there is none (missing, user namespaces off, root without a cgroup or a user
    of its own, a run that would be host root). `user` is `[sandbox] user`; `roots` are the
    workspace's and the policy's (their identities taken), the workspace first."""
    python = shutil.which("python3", path="/usr/bin:/bin") or None
    tree = find_cgroups()
    cgroups = tree if isinstance(tree, CgroupTree) else None
    unbound = f"no cgroup ({tree})" if isinstance(tree, str) else f"cgroup {tree.kind}"
    as_root = os.geteuid() == 0
    if not roots:
        st = os.stat(workspace)
        roots = (
            Root(
                "workspace",
                PurePosixPath(workspace),
                True,
                True,
                DataClass.PRIVATE,
                (st.st_dev, st.st_ino),
            ),
        )
    tools = find_tools(as_root)
    ids = sandbox_user(user) if as_root else None
    base = Sandbox(
        workspace,
        limits,
        None,
        cgroups,
        python,
        "",
        roots=tuple(roots),
        tools=tools if isinstance(tools, Tools) else None,
        user=ids if isinstance(ids, tuple) else None,
    )

    def without(reason: str) -> Sandbox:
        return attrs.evolve(base, reason=reason)

    if isinstance(tools, str):
        return without(tools)
    if isinstance(ids, str):
        return without(ids)
    if tools.bwrap is None:
        return without("bubblewrap (bwrap) is not installed: apt install bubblewrap")
    if cgroups is None and as_root:
        return without(
            f"brokerd runs as root and can make no cgroup ({tree}): nothing would bound the "
            "processes and memory of a command"
        )
    try:
        shown = subprocess.run(
            [tools.bwrap, "--version"], capture_output=True, timeout=10, check=False
        )
        help_text = subprocess.run(
            [tools.bwrap, "--help"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return without(f"{tools.bwrap} does not run: {error}")
    version = shown.stdout.decode(errors="replace").strip() or "bubblewrap"
    sandbox = attrs.evolve(
        base,
        bwrap=tools.bwrap,
        reason=f"{version}; {unbound}",
        disable_userns=b"--disable-userns" in help_text.stdout,
    )
    tried = _try(sandbox)
    if isinstance(tried, str):
        return without(tried)
    if tried.root or tried.capable:
        return without(
            f"a command in it runs as host root or with capabilities ({tried}): nothing runs there"
        )
    return attrs.evolve(sandbox, host_uid=tried.uids[0])


def _try(sandbox: Sandbox) -> Who | str:
    """Start `cat` in `sandbox` and look at it from the host: whom it runs as; or why it
    did not start. (Inside, the user namespaces bwrap nests hide the host's uid.)"""
    group = None
    held: list[tuple[str, int, str]] = []
    process = None
    seen: Who | None = None
    try:
        if sandbox.cgroups is not None:
            group = sandbox.cgroups.make(pids=8, memory=sandbox.limits.memory_bytes)
        shown = sandbox.shown()
        mounts = plan(shown, sandbox.roots)
        held = hold(mounts, shown)
        chain = sandbox.chain(group, COMMAND, confined=True)
        argv = argv_of(chain, ["/bin/cat"], mounts, held, (), WORKDIR)
        fds = [fd for _path, fd, _identity in held] if sandbox.user is None else []
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=ENVIRONMENT,
            cwd="/",
            pass_fds=fds,
            start_new_session=True,
        )
        seen = _command(process)
        _out, err = process.communicate(input=b"", timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap does not start here: {error}"
    finally:
        for _path, fd, _identity in held:
            os.close(fd)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        for _try in range(500 if group is not None else 0):  # its zombies, reaped by init
            if group is not None and group.remove():
                break
            time.sleep(0.01)
    if seen is None:
        words = err.decode(errors="replace").strip().splitlines()[-1:] or ["no word"]
        hint = " (are user namespaces off? see kernel.unprivileged_userns_clone)"
        return f"bubblewrap fails here: {words[0]}{hint if 'namespace' in words[0] else ''}"
    return seen


def _command(process: subprocess.Popen[bytes]) -> Who | None:
    """Whom the sandboxed command of `process` (bwrap, its init, then the command) runs as,
    looked at once it is `cat`; None if the run ended first (within 10 s)."""
    for _try in range(1000):
        if process.poll() is not None:
            return None
        chain = tree_of(process.pid).path(2)
        if len(chain) == 3:
            with contextlib.suppress(OSError):
                if Path(f"/proc/{chain[2]}/comm").read_text().strip() == "cat":
                    return who(chain[2])
        time.sleep(0.01)
    return None
