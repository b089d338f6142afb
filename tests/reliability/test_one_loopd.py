"""One loopd per home: a second loopd is refused before it touches anything, names
the first, and never takes a socket that is not its own; signals stop loopd gracefully or ask
it how it is, never kill it; and the race the issue found: refused starts while the first
loopd creates and answers sessions lose no acknowledged turn and wedge no id."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from bxdev.processes import Process

from boxmaker import proto as p
from boxmaker.client import ChannelError, open_channel
from boxmaker.clock import TickingClock
from boxmaker.store import Store

from ..processes import BIN, Stack
from ..soak import count, size


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path, {"default": {"content": "ok"}})
    try:
        yield running
    finally:
        running.stop()


def second_start(stack: Stack, config: Path | None = None) -> tuple[int, str]:
    """Start another loopd (with the first's config, or `config`); its exit code and words."""
    command = [str(BIN / "loopd"), "serve", "--config", str(config or stack.config)]
    second = Process(command, stack.env, stack.root)
    try:
        code = second.wait(timeout=30)
    finally:
        second.stop()
    return code, second.err.text()


def test_a_second_loopd_is_refused_naming_the_first_and_changes_nothing(stack: Stack) -> None:
    """The issue's race, made still: a creation of the first loopd is half-way (its staging
    folder is there) when a second loopd starts. It used to sweep that folder away."""
    staging = stack.home / "sessions" / ".new-s9-0badcafe"
    staging.mkdir(parents=True)
    (staging / "0.baseline.json").write_text("{}")
    before = sorted(str(path) for path in stack.home.rglob("*"))
    code, said = second_start(stack)
    assert code == 1
    assert f"another loopd (pid {stack.loopd.popen.pid}) is already serving {stack.home}" in said
    assert sorted(str(path) for path in stack.home.rglob("*")) == before
    assert stack.bxctl("--say", "Still there?").returncode == 0


def test_a_second_loopd_on_the_same_home_with_another_socket_is_refused(stack: Stack) -> None:
    other = stack.root / "other.toml"
    other.write_text(stack.config.read_text() + f'[channel]\nsocket = "{stack.root}/b.sock"\n')
    code, said = second_start(stack, other)
    assert code == 1
    assert f"another loopd (pid {stack.loopd.popen.pid}) is already serving" in said
    assert not (stack.root / "b.sock").exists()


def test_a_socket_another_loopd_has_bound_but_not_yet_listens_on_is_left_alone(
    stack: Stack,
) -> None:
    """Between `bind()` and `listen()` a socket refuses connections, as a stale one does; the
    socket's lock tells them apart. A loopd on another home must not replace it."""
    path = stack.root / "shared.sock"
    with open(f"{path}.lock", "w") as lock, socket.socket(socket.AF_UNIX) as starting:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        starting.bind(str(path))  # and not yet listening
        bound = path.stat().st_ino
        other = stack.root / "other.toml"
        other.write_text(
            stack.config.read_text()
            + f'[paths]\nhome = "{stack.root}/home2"\n[channel]\nsocket = "{path}"\n'
        )
        code, said = second_start(stack, other)
        assert code == 1
        assert f"another loopd (pid {os.getpid()}) is already listening on {path}" in said
        assert path.stat().st_ino == bound


def test_a_stopping_loopd_leaves_a_socket_that_is_not_the_one_it_bound(stack: Stack) -> None:
    stack.socket.unlink()
    with socket.socket(socket.AF_UNIX) as newer:  # another's, bound since
        newer.bind(str(stack.socket))
        newer.listen()
        ours = stack.socket.stat().st_ino
        stack.loopd.popen.send_signal(signal.SIGTERM)
        assert stack.loopd.wait() == 0
        assert stack.socket.stat().st_ino == ours


# --- signals --------------------------------------------------------------------------------------


def test_sighup_stops_loopd_gracefully_as_sigterm_does(stack: Stack) -> None:
    assert stack.bxctl("--session", "s1", "--say", "Hi.").returncode == 0
    stack.loopd.popen.send_signal(signal.SIGHUP)  # its terminal closed
    assert stack.loopd.wait() == 0
    assert "SIGHUP: stopping; running turns get 10 s to finish" in stack.loopd.err.text()
    assert "stopped" in stack.loopd.err.lines[-1]
    assert not stack.socket.exists()


def test_sigusr1_logs_a_status_line_and_loopd_goes_on(stack: Stack) -> None:
    stack.loopd.popen.send_signal(signal.SIGUSR1)
    stack.loopd.err.wait_for("SIGUSR1: ")
    status = "SIGUSR1: 0 connections; 0 turns running (0 detached); 0 sessions open; 0 watches"
    assert status in stack.loopd.err.text()
    assert stack.loopd.popen.poll() is None
    assert stack.bxctl("--session", "s1", "--say", "Still there?").returncode == 0


# --- the race, at size ----------------------------------------------------------------------------


async def test_refused_starts_while_sessions_are_created_lose_nothing(stack: Stack) -> None:
    """Many sessions created and answered by the running loopd while second loopds start and
    are refused again and again. Every acknowledged turn is in its log, and every id the
    channels used is either a session that resumes or absent and free (none wedged)."""
    creates, starts = size(200, 5_000), size(3, 60)
    acknowledged: list[p.SessionId] = []
    ids = [p.SessionId(f"race-{n}") for n in range(creates)]
    pending = list(reversed(ids))
    refused = 0

    async def creator() -> None:
        while pending:
            session = pending.pop()
            try:
                async with await open_channel(stack.socket) as channel:
                    await channel.send(p.TurnFrame(session, f"Hello, {session}.", resume=False))
                    while not isinstance(final := await channel.receive(), p.TurnDoneFrame):
                        assert not isinstance(final, p.WireError), f"{session}: {final}"
            except ChannelError as error:
                raise AssertionError(f"{session}: {error}") from None
            acknowledged.append(session)

    async def second_loopds() -> None:
        nonlocal refused
        command = [str(BIN / "loopd"), "serve", "--config", str(stack.config)]
        while refused < starts:
            with trio.fail_after(60):
                done = await trio.run_process(command, env=stack.env, capture_stdout=True,
                                              capture_stderr=True, check=False)  # fmt: skip
            said = done.stderr.decode()
            assert done.returncode == 1, said
            assert f"another loopd (pid {stack.loopd.popen.pid}) is already serving" in said
            refused += 1

    with trio.fail_after(size(300, 3_600)):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(second_loopds)
            for _ in range(4):
                nursery.start_soon(creator)
    assert stack.loopd.popen.poll() is None
    count("race: refused starts of a second loopd", "exit 1, naming the first", refused)

    store = Store(stack.home, TickingClock())
    lost = [s for s in acknowledged if not await whole(store, s)]
    wedged = [s for s in ids if not store.exists(s) and not await creates(stack, s)]
    assert (lost, wedged) == ([], [])
    assert len(acknowledged) == creates
    assert not [n for n in os.listdir(stack.home / "sessions") if n.startswith(".")]
    count("race: sessions created and answered", "acknowledged, whole in the log", creates)


async def whole(store: Store, session: p.SessionId) -> bool:
    """The session resumes, with its one turn."""
    if not store.exists(session):
        return False
    resumed = store.resume(session)
    try:
        users = [r.content for r in resumed.records if isinstance(r, p.UserRecord)]
        answers = [r.content for r in resumed.records if isinstance(r, p.AssistantRecord)]
        return (users, answers) == ([f"Hello, {session}."], ["ok"])
    finally:
        resumed.close()


async def creates(stack: Stack, session: p.SessionId) -> bool:
    """An id that is not a session can be made one (it is not wedged)."""
    async with await open_channel(stack.socket) as channel:
        await channel.send(p.TurnFrame(session, "Again.", resume=False))
        while not isinstance(final := await channel.receive(), p.TurnDoneFrame | p.WireError):
            pass
    return isinstance(final, p.TurnDoneFrame)
