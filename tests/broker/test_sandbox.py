"""The sandbox, for real: bubblewrap with a cgroup and limits around it, and what `shell` and
`run_cell` make of a run (the `sandbox` fixture of conftest.py: skipped where this machine
gives none, unless `BOXMAKER_REQUIRE_SANDBOX` is set)."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.sandbox.bwrap import Sandbox
from boxmaker.brokerd.sandbox.kernel import NEW_INTERPRETER, Kernels
from boxmaker.brokerd.sandbox.shell import run_shell
from boxmaker.proto import DataClass, ResultResponse

from ..helpers import LIMITS

pytestmark = pytest.mark.walls


async def shell(sandbox: Sandbox, command: str, timeout: float = 20) -> str:
    with trio.fail_after(60):
        result = await run_shell(sandbox, command, timeout, DataClass.PRIVATE)
    assert isinstance(result, ResultResponse)
    assert result.untrusted
    return result.content


async def test_the_workspace_is_writable_and_nothing_else_is(sandbox: Sandbox) -> None:
    outside = sandbox.workspace.parent / "outside"
    out = await shell(sandbox, f"echo in > kept; echo x > /etc/x; echo x > {outside}; "
                      "echo x > /usr/x; echo x > /x; echo x > /tmp/t && echo tmp ok")  # fmt: skip
    assert (sandbox.workspace / "kept").read_text() == "in\n"
    assert not outside.exists()
    assert out.count("Read-only file system") + out.count("No such file") >= 4, out
    assert "tmp ok" in out
    assert out.endswith("]")
    assert "[exit 0 ·" in out


async def test_the_owners_files_cannot_be_read(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the owner's key")
    out = await shell(sandbox, f"cat {secret} ~/.ssh/id_rsa /root/.bashrc; ls /home")
    assert "the owner's key" not in out
    assert "No such file" in out


async def test_there_is_no_network(sandbox: Sandbox) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        out = await shell(sandbox, f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
    assert "connected" not in out
    assert "Connection refused" in out


async def test_the_hosts_processes_cannot_be_seen_or_signalled(sandbox: Sandbox) -> None:
    out = await shell(sandbox, f"ls /proc | grep -c '^[0-9]'; kill -0 {os.getpid()} && echo seen")
    assert "seen" not in out
    assert int(out.split()[0]) < 5  # its own few: bwrap's init, bash and ls


async def test_what_outlives_its_command_is_gone_when_the_call_ends(sandbox: Sandbox) -> None:
    marker = f"bx-{os.getpid()}-{id(sandbox)}"
    command = (f"(trap '' TERM; exec -a {marker}-a sleep 1000) & "
               f"setsid bash -c '(exec -a {marker}-b sleep 1000) &' ; "
               f"exec -a {marker}-c sleep 1000")  # fmt: skip
    out = await shell(sandbox, command, timeout=1)
    assert "stopped at its 1 s limit" in out

    def alive() -> list[str]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
        return found

    assert alive() == []
    parents = sandbox.cgroups.parents if sandbox.cgroups is not None else ()
    assert [group for parent in parents for group in parent.glob(f"bx-{os.getpid()}-*")] == []


async def test_limits_stop_a_fork_bomb_memory_a_big_file_and_endless_output(
    sandbox: Sandbox,
) -> None:
    out = await shell(sandbox, "for i in $(seq 100); do sleep 5 & done; wait", timeout=3)
    assert "fork was refused at the 32-process limit" in out or "retry" in out, out
    out = await shell(sandbox, "python3 -c 'x = bytearray(400 * 2**20)'")
    assert "memory limit" in out or "MemoryError" in out, out
    out = await shell(sandbox, "head -c 100M /dev/zero > big; ls -l big")
    assert "size limit" in out, out
    assert (sandbox.workspace / "big").stat().st_size <= LIMITS.file_bytes
    out = await shell(sandbox, "head -c 20M /dev/zero > /tmp/fill; df -k /tmp | tail -1")
    assert "No space left" in out or "size limit" in out, out
    out = await shell(sandbox, "yes")
    assert "printed over 1,048,576 bytes" in out
    assert "bytes of output not kept" in out
    assert "hello" in await shell(sandbox, "echo hello")  # and the next call runs


# Run by the TIOCSTI test as a process whose controlling terminal is a pty (it opens the pty
# as a session leader with none), as brokerd has when started from the owner's terminal.
_FROM_A_TERMINAL = """
import os, sys, trio
from pathlib import Path
from boxmaker.brokerd.sandbox.probe import find_sandbox
from boxmaker.brokerd.sandbox.bwrap import SandboxLimits
from boxmaker.brokerd.sandbox.shell import run_shell
from boxmaker.config import SandboxConfig
from boxmaker.proto import DataClass
terminal = os.open(sys.argv[1], os.O_RDWR)
assert os.tcgetpgrp(terminal) == os.getpgrp()  # the pty is this process's terminal
sandbox = find_sandbox(Path(sys.argv[2]), SandboxLimits.of(SandboxConfig()))
assert sandbox.working, sandbox.reason  # else it would run unconfined and prove nothing
command = sys.argv[3]
print(trio.run(run_shell, sandbox, command, 20, DataClass.PRIVATE).content)
"""

_INJECT = (
    "import fcntl, termios\n"
    "for name in ('/dev/tty', '/proc/self/fd/0', '/proc/self/fd/1', '/proc/self/fd/2'):\n"
    "    try:\n"
    "        with open(name, 'wb') as t:\n"
    "            fcntl.ioctl(t, termios.TIOCSTI, b'x')\n"
    "        print('injected', name)\n"
    "    except OSError as e:\n"
    "        print('refused', name, e.errno)\n"
)


async def test_tiocsti_cannot_push_keys_into_the_owners_terminal(sandbox: Sandbox) -> None:
    leader, follower = os.openpty()
    try:
        name = os.ttyname(follower)
        with trio.fail_after(60):
            ran = await trio.run_process(
                [sys.executable, "-c", _FROM_A_TERMINAL, name, str(sandbox.workspace),
                 f"python3 -c \"{_INJECT}\""],
                start_new_session=True, capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
    finally:
        os.close(leader)
        os.close(follower)
    out = ran.stdout.decode()
    assert ran.returncode == 0, ran.stderr.decode()
    assert "injected" not in out, out
    assert out.count("refused") == 4, out


async def test_many_calls_at_once_all_answer(sandbox: Sandbox) -> None:
    results: dict[int, str] = {}

    async def one(n: int) -> None:
        results[n] = await shell(sandbox, f"echo call {n}")

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(one, n)
    assert all(f"call {n}\n" in results[n] for n in range(20))


async def test_a_cell_keeps_its_state_says_its_errors_and_its_restarts(sandbox: Sandbox) -> None:
    kernels = Kernels(sandbox, trio.CapacityLimiter(2), idle=60, timeout=2)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(kernels.run)

            async def cell(code: str) -> str:
                result = await kernels.cell("s1", code, DataClass.PRIVATE)
                assert isinstance(result, ResultResponse)
                return result.content

            said = await cell("x = 41\nprint('hi')\nx + 1")
            assert said == NEW_INTERPRETER + "[1] hi\nLast value: 42"
            assert await cell("x") == "Last value: 41"
            assert "ZeroDivisionError" in (error := await cell("1 / 0"))
            assert '<cell 3>", line 1' in error
            assert "state lost" in await cell("while True: pass")
            assert (await cell("x")).startswith(NEW_INTERPRETER)
            assert "NameError" in await cell("x")
            started = "import subprocess, threading\nkept = 1\n"
            started += "left = subprocess.Popen(['sleep', '1000'])\nleft.pid"
            said = await cell(started)
            assert "[the cell left 1 process running after it ended" in said, said
            assert "the next cell starts a new one" in said
            assert "NameError" in await cell("kept")  # the interpreter went with it
            nursery.cancel_scope.cancel()


async def test_a_run_outlives_the_thread_that_started_it(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bwrap's --die-with-parent follows the thread that forked it: trio ends an idle worker
    # thread after IDLE_TIMEOUT (10 s), so a run forked in one died then. Made 0.1 s here.
    monkeypatch.setattr(trio._core._thread_cache, "IDLE_TIMEOUT", 0.1)
    await trio.to_thread.run_sync(lambda: None)  # a worker thread, now idle with the short time
    out = await shell(sandbox, "sleep 1; echo survived")
    assert out.startswith("survived\n[exit 0 · "), out
