"""`loopd serve`'s self-test: everything it needs, checked before it binds the socket.

Each check says what it looked at and, when it fails, what to do. The daemon does not start
unless all pass (SPEC section 8). The first checks decide whether loopd may touch the home at
all, and nothing else is looked at until they pass: the home is loopd's user's alone, this is
the only loopd serving it (the home's lock, `lock.py`, taken here and kept in `SelfTest.lock`
for as long as loopd runs), and nothing in it or in the socket's folder could have been
written by another user (`store.trust`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import trio
from attrs import define, field, frozen

from ..config import Config, ConfigError, load_config
from ..infer import Client, InferError
from ..proto import Baseline
from ..session import BaselineTooLarge, SessionError, check_budget
from ..store import problem, problems_at_start, read_baseline
from .lock import Locked, PidLock, take_lock

__all__ = ["LOCK_FILE", "Check", "SelfTest", "self_test"]

LOCK_FILE = "loopd.lock"  # in the home: held by the one loopd serving it


@frozen
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


@define
class SelfTest:
    checks: list[Check] = field(factory=list)
    config: Config | None = None
    lock: PidLock | None = None  # the home's, once taken: the caller releases it

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name, ok, detail))
        return ok


async def self_test(config_path: Path, environ: Mapping[str, str] | None = None) -> SelfTest:
    """Run every check that can run; a failed one stops those that depend on it."""
    result = SelfTest()
    try:
        config = load_config(config_path, environ)
    except ConfigError as error:
        result.add("config", False, str(error))
        return result
    result.config = config
    result.add("config", True, str(config_path))
    home = config.paths.home
    if not await trio.to_thread.run_sync(_own_home, home, result):
        return result  # another loopd, or not ours: nothing else is touched
    found = await trio.to_thread.run_sync(problems_at_start, home, config.channel.socket.parent)
    for said in found:
        result.add("trust", False, f"{said}; make it loopd's user's alone (chown, chmod go-w)")
    if found:
        return result
    result.add("trust", True, f"{home} and the socket's folder are loopd's user's alone")
    result.add("home", *await trio.to_thread.run_sync(_writable, home))
    baseline: Baseline | None = None
    try:
        baseline = await trio.to_thread.run_sync(read_baseline, config.baseline.system, home)
    except SessionError as error:
        result.add("system.md", False, f"{error}; [baseline] system names it")
    else:
        tools = ", ".join(t.name for t in baseline.tools)
        result.add("baseline", True, f"{config.baseline.system} and tools {tools}")
    folder = config.channel.socket.parent
    try:
        await trio.to_thread.run_sync(_make_folder, folder)
    except OSError as error:
        result.add("socket folder", False, f"cannot create {folder}: {error.strerror}")
    else:
        result.add("socket folder", True, str(folder))
    environ = os.environ if environ is None else environ
    async with Client(config, environ=environ) as client:
        if await _health(client, config, result) and baseline is not None:
            await _budget(client, config, baseline, result)
    return result


def _own_home(home: Path, result: SelfTest) -> bool:
    """Make the home if it is missing, check it is loopd's user's alone, then lock it."""
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        return result.add("home", False, f"cannot create {home}: {error.strerror}")
    if (said := problem(home, follow=True)) is not None:
        return result.add(
            "home", False, f"{home} {said}; loopd uses only a home its user alone can write"
        )
    try:
        result.lock = take_lock(home / LOCK_FILE)
    except Locked as error:
        who = f"pid {error.pid}" if error.pid is not None else "a process"
        return result.add(
            "home",
            False,
            f"another loopd ({who}) is already serving {home} (it holds {error.path}); stop "
            "it first, or give this one another [paths] home",
        )
    except SessionError as error:  # Untrusted: a link, or not ours alone
        return result.add("home", False, str(error))
    except OSError as error:
        return result.add("home", False, f"cannot lock {home / LOCK_FILE}: {error.strerror}")
    return True


def _make_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def _writable(home: Path) -> tuple[bool, str]:
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".selftest-"):
            pass
    except OSError as error:
        return False, f"cannot write in {home}: {error.strerror}; set [paths] home or BOXMAKER_HOME"
    return True, str(home)


async def _health(client: Client, config: Config, result: SelfTest) -> bool:
    """`/health` must answer 200 within the connect timeout (503 while the model loads)."""
    url = config.server.base_url
    seconds = config.server.connect_timeout_s
    last = "no answer"
    with trio.move_on_after(seconds):
        while True:
            try:
                await client.health()
            except InferError as error:
                last = str(error)
            else:
                return result.add("llama-server", True, f"{url}/health answered 200")
            await trio.sleep(0.2)  # a real server starting: nothing to wait on but its answer
    return result.add(
        "llama-server",
        False,
        f"{url}/health did not answer 200 within {seconds:g} s ({last}); is llama-server "
        "running, and is [server] base_url right?",
    )


async def _budget(client: Client, config: Config, baseline: Baseline, result: SelfTest) -> None:
    try:
        tokens = await check_budget(baseline, client.count_tokens, config.baseline.max_tokens)
    except BaselineTooLarge as error:
        result.add("baseline budget", False, str(error))
    except InferError as error:
        result.add("baseline budget", False, f"the server could not count tokens: {error}")
    else:
        limit = config.baseline.max_tokens
        result.add("baseline budget", True, f"{tokens} tokens of at most {limit}")
