"""Storage faults (SPEC section 13): a full disk and a read-only home under a live `loopd serve`.

The home is a small tmpfs (when the test runs as root and may mount), filled up for real: a
turn whose records no longer fit gets `internal` naming the log, the log stays at a record
boundary, and loopd serves on; once there is room again the session goes on. A read-only home
is a remount of that tmpfs. Where mounting is not allowed, the in-process tests below inject the
same errors, as they also do for what a mount cannot show: the file system turning read-only
while a log is open for appending.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.client import open_channel
from boxmaker.clock import TickingClock
from boxmaker.store import FileSystem, Store
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..daemon.test_service import error_of, one_turn, open_daemon, turn
from ..helpers import read_log
from ..processes import Stack
from ..soak import count

# About 13 kB, no sentence twice (an answer repeating itself is stopped early).
LONG = " ".join(f"Line {n} of a long answer that will not fit on a full disk." for n in range(200))


def mount(*args: str) -> bool:
    try:
        return subprocess.run(["mount", *args], capture_output=True).returncode == 0
    except OSError:  # no mount(8) here
        return False


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs at tmp_path/home."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    if os.geteuid() != 0 or not mount("-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(home)):
        pytest.skip("cannot mount a tmpfs here; the injected faults below stand in")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=True)


async def final_of(stack: Stack, session: str, content: str, resume: bool = True) -> p.Frame:
    async with await open_channel(stack.socket) as loop:
        await loop.send(p.TurnFrame(p.SessionId(session), content, resume=resume))
        while not isinstance(final := await loop.receive(), p.TurnDoneFrame | p.WireError):
            pass
    return final


def internal(frame: p.Frame) -> str:
    """The message of an `internal` error."""
    assert isinstance(frame, p.WireError), frame
    assert frame.code is p.ErrorCode.INTERNAL, frame
    return frame.message


def fill(disk: Path) -> Path:
    """Take every free byte of the disk; the file to remove to free them."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (65536, 4096, 512, 1):
            with pytest.raises(OSError, match="No space left on device"):
                write_until_full(fd, chunk)
    finally:
        os.close(fd)
    return filler


def write_until_full(fd: int, chunk: int) -> None:
    while True:
        os.write(fd, b"\0" * chunk)


def log_bytes(stack: Stack, session: str) -> bytes:
    return (stack.home / "sessions" / session / "0.jsonl").read_bytes()


async def test_a_full_disk_and_a_read_only_home_under_a_live_loopd(
    tmp_path: Path, small_disk: Path
) -> None:
    stack = Stack(tmp_path, {"replies": [{"content": "Short."}, {"content": LONG},
                                         {"content": "Back."}, {"content": "Fine."}]},
                  "--ms-per-token", "0")  # fmt: skip
    log = stack.home / "sessions" / "s1" / "0.jsonl"
    try:
        assert isinstance(await final_of(stack, "s1", "Hi.", resume=False), p.TurnDoneFrame)
        filler = fill(small_disk)
        before = log_bytes(stack, "s1")

        # The user message fits in the log's last page; the long answer does not.
        full = internal(await final_of(stack, "s1", "Tell me a lot."))
        assert f"cannot write {log}: No space left on device" in full
        kept = log_bytes(stack, "s1")
        assert kept.startswith(before)
        assert kept.endswith(b"\n")
        # At a record boundary: the user message, and the turn's end if it still fitted.
        ending = [type(r) for r in read_log(log)[-2:]]
        assert ending[-1] is p.UserRecord or ending == [p.UserRecord, p.TurnEndRecord]
        new = internal(await final_of(stack, "s2", "Hello?", resume=False))
        assert str(stack.home / "sessions" / "s2") in new
        count("storage faults", "full disk: internal, log at a record boundary")

        filler.unlink()
        assert isinstance(await final_of(stack, "s1", "Again."), p.TurnDoneFrame)

        # A read-only home: the session is closed once its turn is over (it was dropped after
        # the failure and is not cached while the file system is remounted).
        stack_sessions_closed(stack)
        assert mount("-o", "remount,ro", str(small_disk)), "remount read-only failed"
        try:
            before = log_bytes(stack, "s1")
            ro = internal(await final_of(stack, "s1", "Still there?"))
            assert f"cannot write {log}: Read-only file system" in ro
            assert log_bytes(stack, "s1") == before
            count("storage faults", "read-only home: internal, log unchanged")
        finally:
            assert mount("-o", "remount,rw", str(small_disk))
        assert isinstance(await final_of(stack, "s1", "And now?"), p.TurnDoneFrame)
        assert stack.loopd.popen.poll() is None
        Store(stack.home, TickingClock()).resume(p.SessionId("s1"))
    finally:
        stack.stop()


def stack_sessions_closed(stack: Stack) -> None:
    """loopd keeps a few sessions open between turns; restart it so none is."""
    stack.loopd.stop()
    stack.loopd = stack.start_loopd()
    stack.loopd.err.wait_for("listening on")


# --- injected, in process -------------------------------------------------------------------------


class TurnsReadOnly(FileSystem):
    """The file system turns read-only while the log is open: the next write fails."""

    read_only = False

    def write(self, fd: int, data: bytes) -> int:
        if self.read_only:
            raise OSError(errno.EROFS, "Read-only file system")
        return super().write(fd, data)


class FillsUp(FileSystem):
    """A disk with `room` bytes left (None: plenty): a write takes what fits, the next one
    fails with ENOSPC."""

    room: int | None = None

    def write(self, fd: int, data: bytes) -> int:
        if self.room is None:
            return super().write(fd, data)
        if self.room == 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        taken = super().write(fd, data[: self.room])
        self.room -= taken
        return taken


@pytest.mark.parametrize("fault", ["read-only", "full mid-write"])
async def test_a_log_open_for_appends_when_the_disk_fails(tmp_path: Path, fault: str) -> None:
    fs: FileSystem = TurnsReadOnly() if fault == "read-only" else FillsUp()
    fake = FakeLlamaServer(default=Reply(content="An answer."))
    async with open_daemon(tmp_path, fake) as daemon:
        daemon.store.fs = fs
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)
        log = daemon.store.folder(p.SessionId("s1")) / "0.jsonl"
        before = log.read_bytes()
        if isinstance(fs, TurnsReadOnly):
            fs.read_only = True
        else:
            fs.room = 10
        error = await error_of(await one_turn(daemon, turn(resume=True)))
        assert error.code is p.ErrorCode.INTERNAL
        assert str(log) in error.message
        assert log.read_bytes() == before  # nothing of the failed records is left
        if isinstance(fs, TurnsReadOnly):
            fs.read_only = False
        else:
            fs.room = None
        assert isinstance((await one_turn(daemon, turn(resume=True)))[-1], p.TurnDoneFrame)
