"""Access (SPEC section 13): only the owner reaches loopd and the sessions; a session id never
names a path outside `sessions/`; the server's API key is never written anywhere."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..daemon.test_service import error_of, one_turn, open_daemon, turn
from ..processes import Stack
from ..soak import count
from .test_fuzz import ESCAPES

NOBODY = 65534
KEY = "sk-boxmaker-test-7f3a9c1e5b"  # distinctive: any appearance of it is a leak


def modes(root: Path) -> Iterator[tuple[Path, int]]:
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            yield path, stat.S_IMODE(path.lstat().st_mode)


def test_everything_loopd_makes_is_its_owner_s_alone(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"default": {"content": "ok"}})
    try:
        assert stack.bxctl("--session", "s1", "--say", "Hi.").returncode == 0
        made = dict(modes(stack.home))
        assert made[stack.socket] == 0o600
        assert made[stack.socket.parent] == 0o700
        assert made[stack.home / "sessions" / "s1" / "0.jsonl"] == 0o600
        assert made[stack.home / "sessions" / "s1"] == 0o700
        assert {path: mode for path, mode in made.items() if mode & 0o077} == {}
    finally:
        stack.stop()


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder anyone may pass through (as /run or /var/lib are), for loopd's socket."""
    with tempfile.TemporaryDirectory(prefix="bx-access-") as folder:
        os.chmod(folder, 0o755)
        yield Path(folder)


def as_nobody(path: Path) -> str:
    """What an unprivileged user gets when connecting to `path` (a child that drops root)."""
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit
        code = 3
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = 2
            with socket.socket(socket.AF_UNIX) as sock:
                try:
                    sock.connect(str(path))
                    code = 0
                except PermissionError:
                    code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 3:
        pytest.skip(f"cannot switch to uid {NOBODY} here (a user namespace without it?)")
    return {0: "connected", 1: "denied"}[code]


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_another_user_cannot_connect(tmp_path: Path, shared_tmp: Path) -> None:
    path = shared_tmp / "loop" / "loop.sock"
    stack = Stack(tmp_path, {"default": {"content": "ok"}},
                  config=f'[channel]\nsocket = "{path}"\n')  # fmt: skip
    try:
        assert as_nobody(path) == "denied"  # the folder is 0700
        os.chmod(path.parent, 0o711)  # let others through the folder: the socket's own
        assert as_nobody(path) == "denied"  # mode (0600) still keeps them out
        os.chmod(path, 0o666)  # and the check can tell: a socket open to all lets them in
        assert as_nobody(path) == "connected"
        count("access checks", "another user denied", 2)
    finally:
        stack.stop()


@pytest.mark.parametrize("session", ESCAPES)
async def test_a_session_id_that_would_leave_sessions_is_refused(
    tmp_path: Path, session: str
) -> None:
    home = tmp_path / "home"
    async with open_daemon(home, FakeLlamaServer(default=Reply(content="ok"))) as daemon:
        data = p.dumps(p.TurnFrame(p.SessionId("ok"), "Hi.", resume=False)).replace(
            b'"session":"ok"', b'"session":' + p.dumps(session)
        )
        error = await error_of(await one_turn(daemon, data + b"\n"))
        assert error.code is p.ErrorCode.BAD_FRAME
        assert "session" in error.message
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)
    assert sorted(os.listdir(tmp_path)) == ["home"]
    assert sorted(os.listdir(home)) == ["sessions", "system.md"]
    assert os.listdir(home / "sessions") == ["s1"]


def test_the_api_key_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key reaches the server, and appears in no log line, error, frame or file, at debug
    level too, with the server failing a request and refusing a wrong key."""
    monkeypatch.setenv("BX_TEST_KEY", KEY)
    script = {"replies": [{"content": "ok"}, {"tool_calls": [["clock", "{}"]]},
                          {"content": "It is late."}, {"fault": "server_error"}]}  # fmt: skip
    stack = Stack(tmp_path, script, "--api-key", KEY, config='api_key_env = "BX_TEST_KEY"\n',
                  loopd_args=("--log-level", "debug"))  # fmt: skip
    said: list[str] = []
    try:
        for text in ("Hi.", "What time is it?", "And now?"):
            chat = stack.bxctl("--session", "s1", "--json", "--say", text)
            said += [chat.stdout, chat.stderr]
        assert '"content":"It is late."' in said[2]  # the key reached the server
        assert '"code":"inference"' in said[4]  # the 500 was answered and reported
        stack.loopd.stop()
        said += [stack.loopd.err.text()]
        stack.env["BX_TEST_KEY"] = "a-wrong-key"
        stack.loopd = stack.start_loopd("--log-level", "debug")
        assert stack.loopd.wait() == 1  # the self-test meets the server's 401
        said += [stack.loopd.err.text()]
        assert "401" in said[-1]
    finally:
        stack.stop()
    said += [stack.fake.out.text(), stack.fake.err.text()]
    files = [path for path, _ in modes(tmp_path) if path.is_file()]
    leaks = [text for text in said if KEY in text]
    leaks += [str(path) for path in files if KEY.encode() in path.read_bytes()]
    assert leaks == []
    count("access checks", "outputs and files without the API key", len(said) + len(files))


def test_no_recording_holds_a_key_header() -> None:
    """The recorder drops the key's headers (tests/dev/test_recorder.py sends one through it);
    the recordings it made hold none."""
    recordings = sorted((Path(__file__).parents[2] / "recordings").glob("*.http"))
    assert len(recordings) >= 10
    for recording in recordings:
        for line in recording.read_text().lower().splitlines():
            assert not line.startswith(("authorization:", "x-api-key:")), recording.name
