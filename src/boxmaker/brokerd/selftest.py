"""`brokerd serve`'s self-test: everything it needs, checked before it binds its socket.

As loopd's: the config (the whole file, one schema for both daemons); the home is its user's
alone and no other brokerd serves it (`<home>/brokerd.lock`, kept in `BrokerTest.lock`); the
workspace exists (made 0700) and is writable; the policy loads, its examples hold, and
neither the workspace nor any root it grants holds the home, the sessions, the config, the
policy or the memory folder (an agent that can edit its own grants has none); and which
sandbox the machine gives `shell` and `run_cell` (bubblewrap, tried by running `true` in it),
or why none: that is no failure (brokerd serves its other tools; those two fail closed).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import trio
from attrs import define, field

from .. import layout
from ..config import Config
from ..memory import NotesDamaged, NotesFile
from ..serving import Checks, own_home, writable
from ..session import SessionError
from .files.roots import Root, written
from .policy.load import load_policy
from .policy.rules import SHIPPED_POLICY, Policy, PolicyError
from .sandbox.bwrap import Sandbox, SandboxLimits
from .sandbox.ownership import sandbox_user, take_over
from .sandbox.probe import find_sandbox

__all__ = ["BrokerTest", "broker_self_test", "protected_paths", "sealed_paths"]

log = logging.getLogger("brokerd")


@define
class BrokerTest(Checks):
    config: Config | None = None
    policy: Policy | None = None
    sandbox: Sandbox | None = None
    guarded: list[Path] = field(factory=list)  # what no grant, nor folder shown, may hold
    workspace: Path | None = None  # its real path, links resolved


def protected_paths(config: Config, config_path: Path) -> list[Path]:
    """What no grant may hold: the home, the sessions, the config, the policy, the memory."""
    home = config.paths.home
    return [
        home,
        layout.sessions_folder(home),
        config_path.absolute(),
        config.broker.policy,
        layout.memory_folder(home),
    ]


def sealed_paths(config: Config) -> list[Path]:
    """What no grant may be inside either: the sessions, the memory, the sockets, brokerd's
    own state and the gateway's (the workspace may be in the home, beside them)."""
    home = config.paths.home
    return [
        layout.sessions_folder(home),
        layout.memory_folder(home),
        layout.run_folder(home),
        layout.broker_folder(home),
        layout.gateway_folder(home),  # the gateway's token
        config.broker.socket.parent,
        config.channel.socket.parent,
    ]


async def broker_self_test(
    config_path: Path, environ: Mapping[str, str] | None = None
) -> BrokerTest:
    result = BrokerTest()
    if (config := result.load(config_path, environ)) is None:
        return result
    result.config = config
    if not await trio.to_thread.run_sync(_own_home, config.paths.home, result):
        return result
    if not await trio.to_thread.run_sync(_workspace, config.tools.workspace, result):
        return result
    # The workspace as it is (links resolved): every root's path is compared with it.
    workspace = result.workspace = config.tools.workspace.resolve()
    protected = protected_paths(config, config_path)
    result.guarded = [*protected, *sealed_paths(config)]
    policy = await trio.to_thread.run_sync(
        _policy, config, workspace, protected, sealed_paths(config), result
    )
    if policy is None:
        return result
    result.policy = policy
    if not await trio.to_thread.run_sync(_memory, config.paths.home, result):
        return result
    roots = (policy.workspace_root(PurePosixPath(workspace)), *policy.roots)
    if not await trio.to_thread.run_sync(_given_over, config, roots, result):
        return result
    limits = SandboxLimits.of(config.sandbox)
    sandbox = await trio.to_thread.run_sync(
        lambda: find_sandbox(workspace, limits, user=config.sandbox.user, roots=roots)
    )
    result.sandbox = sandbox
    _sandbox(sandbox, result)
    return result


def _given_over(config: Config, roots: tuple[Root, ...], result: BrokerTest) -> bool:
    """Under root, the workspace is the sandbox's user's: given to it (all but the roots
    inside it that are closed or read-only, which the sandbox never writes). A sandbox's user
    that is root or no account fails the self-test: nothing may run as root."""
    if os.geteuid() != 0:
        return True
    user = sandbox_user(config.sandbox.user)
    if isinstance(user, str):
        return result.add("sandbox", False, user)
    try:
        sandboxed = written(roots)
        take_over(str(roots[0].path), user, sandboxed.keep, [str(top) for top in sandboxed.tops])
    except OSError as error:
        return result.add(
            "sandbox",
            False,
            f"cannot give the workspace to the sandbox's user (uid {user[0]}): {error}",
        )
    return True


def _sandbox(sandbox: Sandbox, result: BrokerTest) -> bool:
    """Which sandbox the machine gives and who runs in it: none is no failure (shell and
    run_cell fail closed)."""
    uid = (
        sandbox.host_uid
        if sandbox.host_uid is not None
        else (sandbox.user[0] if sandbox.user is not None else os.geteuid())
    )
    who = f"as uid {uid}" + (" (the sandbox's user)" if sandbox.user is not None else "")
    if sandbox.working:
        return result.add("sandbox", True, f"{sandbox.reason}; shell and run_cell run in it {who}")
    then = (
        "every call asks ([sandbox] unconfined) and runs"
        if result.policy is not None and result.policy.unconfined
        else "shell and run_cell are denied"
    )
    return result.add("sandbox", True, f"none: {sandbox.reason}; {then} {who}")


def _own_home(home: Path, result: BrokerTest) -> bool:
    if own_home(home, result, layout.BROKER_LOCK, "brokerd"):
        return result.add("home", True, str(home))
    return False


def _memory(home: Path, result: BrokerTest) -> bool:
    """The memory folder is this user's alone (made 0700 when missing), and what its notes
    say; damaged notes fail only `remember` and `forget` (they say why), not brokerd."""
    folder = layout.memory_folder(home)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        notes = NotesFile(home).read()
    except NotesDamaged as error:
        return result.add("memory", True, f"{folder}: {error}")
    except SessionError as error:  # Exposed: another user could plant memories
        return result.add("memory", False, str(error))
    except OSError as error:
        return result.add("memory", False, f"cannot make {folder}: {error.strerror}")
    return result.add("memory", True, f"{folder}: {len(notes.live)} notes")


def _workspace(workspace: Path, result: BrokerTest) -> bool:
    if (failed := writable(workspace)) is not None:
        return result.add("workspace", False, f"{failed}; set [tools] workspace")
    return result.add("workspace", True, str(workspace))


def _policy(
    config: Config, folder: Path, protected: list[Path], sealed: list[Path], result: BrokerTest
) -> Policy | None:
    """Load the policy; a missing one is made from the shipped text first (0600)."""
    path = config.broker.policy
    workspace = PurePosixPath(folder)
    made = ""
    try:
        with open(path, "x", encoding="utf-8") as file:  # never over one that exists
            file.write(SHIPPED_POLICY)
        made = " (made from the shipped policy)"
    except FileExistsError:
        pass
    except OSError as error:
        result.add("policy", False, f"{path} is missing and cannot be made: {error.strerror}")
        return None
    try:
        policy = load_policy(path, workspace, protected, sealed)
    except PolicyError as error:
        result.add("policy", False, str(error))
        return None
    result.add("policy", True, f"{path}{made}: {len(policy.examples)} examples hold")
    return policy
