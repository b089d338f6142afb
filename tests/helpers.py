"""Small helpers shared by the tests."""

from __future__ import annotations

import errno
import os
import random
import shutil
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from boxmaker import proto as p
from boxmaker.brokerd.hands import Hands
from boxmaker.brokerd.sandbox.bwrap import Sandbox, SandboxLimits
from boxmaker.brokerd.sandbox.kernel import Kernels
from boxmaker.brokerd.sandbox.ownership import sandbox_user, take_over
from boxmaker.brokerd.sandbox.probe import find_sandbox
from boxmaker.clock import TickingClock
from boxmaker.config import Config, SandboxConfig, parse_config
from boxmaker.layout import epochs_in
from boxmaker.loopd.infer import Client
from boxmaker.loopd.loop import Runtime
from boxmaker.loopd.replay import read_tape, replay, select_runs
from boxmaker.profiles import Profile, load_profile
from boxmaker.session import (
    assemble_baseline,
    parse_log,
    profile_baseline,
    sha256_hex,
)
from boxmaker.store import FileSystem, MemoryText, OpenSession, Store
from boxmaker.testing import FakeTools
from boxmaker.testing.fake_server import FakeLlamaServer


@contextmanager
def deadline(seconds: float, waiting_for: str) -> Iterator[None]:
    """Fail the test, naming what it waited for, unless the block is done within `seconds`
    (of the test's clock: with the autojump clock a wait that can never end fails at once)."""
    try:
        with trio.fail_after(seconds):
            yield
    except trio.TooSlowError:
        pytest.fail(f"{waiting_for}: not within {seconds:g} s", pytrace=False)


def read_log(path: Path) -> list[p.LogRecord]:
    """The records of an epoch's log, its chain checked against that epoch's baseline."""
    epoch = path.name.split(".")[0]
    genesis = sha256_hex(path.with_name(f"{epoch}.baseline.json").read_bytes())
    return parse_log(path.read_bytes(), path, genesis).records


def read_epochs(folder: Path) -> list[list[p.LogRecord]]:
    """The records of each epoch of the session in `folder`, in order."""
    return [read_log(folder / f"{n}.jsonl") for n in epochs_in(os.listdir(folder))]


def make_config(text: str = "", home: Path = Path("/nonexistent/home")) -> Config:
    """A config parsed from `text`, as if it sat in `/etc/boxmaker/`."""
    return parse_config(text, Path("/etc/boxmaker/config.toml"), {"BOXMAKER_HOME": str(home)})


def new_hands(sandbox: Sandbox, kernels: Kernels, **timeouts: float) -> Hands:
    """`Hands` for `sandbox` around `kernels`, with the config's default `[tools]` timeouts
    but those given (`shell_timeout`, `shell_max_timeout`, `call_timeout`)."""
    tools = make_config().tools
    defaults = {"shell_timeout": tools.shell_timeout_s, "call_timeout": tools.call_timeout_s,
                "shell_max_timeout": tools.shell_max_timeout_s}  # fmt: skip
    return Hands(sandbox, kernels, **(defaults | timeouts))


class EventLog:
    """An `on_event` callback that keeps every event and lets a test wait for a kind."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self._seen: defaultdict[type, trio.Event] = defaultdict(trio.Event)

    def __call__(self, event: object) -> None:
        self.events.append(event)
        self._seen[type(event)].set()

    async def wait_for(self, kind: type) -> None:
        await self._seen[kind].wait()

    def of(self, kind: type) -> list[object]:
        return [e for e in self.events if isinstance(e, kind)]

    def text(self, kind: type = p.Content) -> str:
        return "".join(e.text for e in self.events if isinstance(e, kind))  # type: ignore[attr-defined]


@attrs.define
class Rig:
    """A session on disk and a runtime talking to a fake server: what a turn test needs."""

    store: Store
    session: OpenSession
    runtime: Runtime
    tools: FakeTools
    fake: FakeLlamaServer
    replay: bool = True  # replayed when the test ends (off: the test changes its files)

    async def reopen(self) -> OpenSession:
        """Drop the in-memory session and resume it from disk, as after a restart."""
        self.session.close()
        self.session = self.store.resume(self.session.id)
        return self.session


SYSTEM = "You are Boxmaker, in a test."


class NoMemory:
    """The memory half of a tool port made for a test: no auto-recall ever finds anything,
    and a session's change is not told anywhere."""

    async def auto_recall(self, frame: p.RecallFrame) -> p.ToolResponse:
        return p.ResultResponse("", p.DataClass.PRIVATE, untrusted=False, truncated=False)

    async def session_changed(self, session: p.SessionId) -> None:
        pass


def fenced_baseline(profile: str = "smollm2-135m", **changes: Any) -> p.Baseline:
    """A new session's baseline under a fenced profile (with `changes` to the profile)."""
    chosen = attrs.evolve(load_profile(profile), **changes)
    return profile_baseline(SYSTEM, None, chosen)


@asynccontextmanager
async def open_rig(
    home: Path,
    fake: FakeLlamaServer,
    config_text: str = "",
    session: str = "chat-1",
    clock: TickingClock | None = None,
    baseline: p.Baseline | None = None,
    profile: Profile | None = None,
    memory: MemoryText | None = None,
) -> AsyncIterator[Rig]:
    config = make_config(config_text, home)
    clock = clock or TickingClock()
    store = Store(home, clock, memory=memory)
    baseline = baseline or assemble_baseline(SYSTEM, None)
    opened = store.create(p.SessionId(session), baseline, "main")
    tools = FakeTools(clock)
    transport = fake.mock_transport()
    async with Client(config, transport=transport, rng=random.Random(0), profile=profile) as client:
        runtime = Runtime(config, client, tools, clock)
        rig = Rig(store, opened, runtime, tools, fake)
        try:
            yield rig
        finally:
            rig.session.close()
        if rig.replay:
            await replays_identical(rig.session.log_path.parent, config)


async def replays_identical(folder: Path, config: Config) -> None:
    """Replay the session in `folder` (SPEC section 20): the loop run again on its log must
    write it byte for byte. A test that changes a session's files by hand turns it off."""
    tape = read_tape(folder)
    report = await replay(folder, select_runs(tape), tape, config)
    if not report.identical and os.environ.get("REPLAY_KEEP"):
        shutil.rmtree(os.environ["REPLAY_KEEP"], ignore_errors=True)
        shutil.copytree(folder, os.environ["REPLAY_KEEP"])
    assert report.identical, report


class FullDisk(FileSystem):
    """A disk with no room left: every fsync fails with ENOSPC."""

    def fsync(self, fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


class BrokenPipe(trio.abc.Stream):
    """A connection whose reader is gone: `data` arrives, then every write breaks, and the
    end of the stream never comes (a peer killed while it was written to)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data, self.data = self.data, b""
        if not data:
            await trio.sleep_forever()
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        raise trio.BrokenResourceError("the peer went away")

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


# Small enough for the sandbox's limits to be reached quickly; the machine's disk is never filled.
LIMITS = SandboxLimits.of(SandboxConfig(memory_mb=128, processes=32, file_mb=4, tmp_mb=8,
                                        output_mb=1))  # fmt: skip


def real_sandbox(workspace: Path, limits: SandboxLimits = LIMITS) -> Sandbox:
    """The machine's sandbox for `workspace`; the test is skipped where there is none, unless
    `BOXMAKER_REQUIRE_SANDBOX` is set (CI sets it: there a skip would hide a broken sandbox)."""
    workspace.mkdir(exist_ok=True)
    if os.geteuid() == 0 and isinstance(user := sandbox_user(""), tuple):
        take_over(str(workspace), user, ())  # as brokerd's self-test does, before it looks
    found = find_sandbox(workspace, limits)
    if not found.working:
        if os.environ.get("BOXMAKER_REQUIRE_SANDBOX"):
            pytest.fail(f"no sandbox here: {found.reason}")
        pytest.skip(f"no sandbox here: {found.reason}")
    return given_over(found)


def given_over(sandbox: Sandbox) -> Sandbox:
    """`sandbox` with its workspace given to the sandbox's user, as brokerd's self-test does
    under root (else nothing changes)."""
    if sandbox.user is not None:
        take_over(str(sandbox.workspace), sandbox.user, ())
    return sandbox
