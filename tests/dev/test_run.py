"""The first run's developer tools: the build's stages and progress (`bxdev.steps`), and
`make run`/`make serve`/`make stop`'s settings and one instance per checkout (`bxdev.run`,
`bxdev.servers`), without the real server."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from bxdev import llama_build
from bxdev.run import LLAMA_TOML, LlamaSettings, Options, RunError, llama_settings, main, parse
from bxdev.servers import Busy, Instance, Server, bxctl_line, port_taken, stop_recorded
from bxdev.steps import StepFailed, Steps, compile_percent, duration

PY = sys.executable
# A stand-in for loopd: listens on the socket it is given, then waits to be stopped.
LISTEN = (
    "import socket, sys, time; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); "
    "s.listen(); time.sleep(60)"
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 10.0  # every look at the clock: ten seconds later
        return self.now


def test_compile_progress_is_read_from_make_and_ninja_lines() -> None:
    assert compile_percent("[ 45%] Building CXX object common/arg.cpp.o") == 45
    assert compile_percent("[100%] Linking CXX executable ../../bin/llama-server") == 100
    assert compile_percent("[12/48] Building CXX object x.o") == 25
    assert compile_percent("-- Configuring done") is None
    assert compile_percent("[0/0] nothing") is None


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (0.34, 9.96, 42.4, 60, 125, 3725)] == [
        "0.3 s", "10 s", "42 s", "1 min", "2 min 5 s", "1 h 2 min"
    ]  # fmt: skip


def test_a_stage_says_what_and_how_long_and_the_compile_is_one_line_a_tenth(
    tmp_path: Path,
) -> None:
    err = io.StringIO()
    steps = Steps("build", tmp_path / "build.log", total=2, err=err, clock=Clock())
    lines = "".join(f"print('[{p:3d}%] Building CXX object f{p}.o')\n" for p in range(0, 101, 4))
    steps.run("compiling", "about 9 min", [PY, "-c", lines], progress=True)
    out = err.getvalue().splitlines()
    assert out[0] == "build: [1/2] compiling (about 9 min)"
    tenths = [line for line in out if "compiling: " in line]
    assert [line.split(": ")[2].split("%")[0] for line in tenths] == [
        "0", "12", "20", "32", "40", "52", "60", "72", "80", "92", "100"
    ]  # fmt: skip
    assert "left" not in tenths[0]  # no guess before a tenth
    assert "left" in tenths[1]
    assert tenths[-1].endswith("100% after 1 min 50 s")
    assert out[-1].startswith("build:       done in ")
    assert len(out) == 13  # the compiler's own lines went to the log only
    log = (tmp_path / "build.log").read_text()
    assert "[ 48%] Building CXX object f48.o" in log


def test_a_failed_stage_names_the_log_and_shows_its_end(tmp_path: Path) -> None:
    steps = Steps("build", tmp_path / "build.log", total=1, err=io.StringIO())
    failing = "import sys; print('cc: error: no such file'); sys.exit(2)"
    with pytest.raises(StepFailed) as caught:
        steps.run("configuring", "a moment", [PY, "-c", failing])
    message = str(caught.value)
    assert message.startswith(f"configuring failed (exit 2); the full log is {tmp_path}/build.log")
    assert message.endswith("cc: error: no such file")
    with pytest.raises(StepFailed, match="cannot run /nonexistent/cmake"):
        steps.command(["/nonexistent/cmake"])


def test_make_run_takes_its_own_options_and_passes_the_rest_to_bxctl() -> None:
    assert parse(["--session", "s1"]) == Options(chat_args=("--session", "s1"))
    assert parse(["run", "--ctx", "8192", "--threads", "4", "--", "--json", "--say", "Hi"]) == (
        Options("run", 8192, 4, chat_args=("--json", "--say", "Hi"))
    )  # fmt: skip
    assert parse(["serve", "--threads", "1", "--"]) == Options("serve", threads=1)
    assert parse(["stop"]) == Options("stop")
    assert parse(["gateway", "--ctx", "2048"]) == Options("gateway", 2048)
    assert parse(["--model", "m.gguf", "--server", "http://h:1"]) == Options(
        model="m.gguf", server="http://h:1"
    )
    with pytest.raises(RunError, match="--ctx takes a whole number"):
        parse(["--ctx", "lots"])
    with pytest.raises(RunError, match=r"--model takes a value \(MODEL=...\)"):
        parse(["--model"])
    with pytest.raises(RunError, match="CTX and THREADS are for the llama-server `make run`"):
        parse(["--server", "http://h:1", "--ctx", "8192"])


def test_context_threads_and_model_come_from_the_file_or_the_command_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "llama-server.toml"
    path.write_text(LLAMA_TOML)
    settings = llama_settings(path, Options())
    assert (settings.ctx, settings.flags, settings.model) == (4096, (), None)
    assert settings.threads >= 1  # 0 in the file: one per core
    path.write_text('ctx = 2048\nthreads = 3\nflags = ["--no-mmap"]\nmodel = "m/own.gguf"\n')
    mine = LlamaSettings(2048, 3, ("--no-mmap",), tmp_path / "m/own.gguf", f"model = in {path}")
    assert llama_settings(path, Options()) == mine  # relative: to the file's folder
    given = llama_settings(path, Options(ctx=16384, threads=1, model="other.gguf"))
    assert given == LlamaSettings(16384, 1, ("--no-mmap",), Path.cwd() / "other.gguf",
                                  "MODEL=other.gguf")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ctxx = 1\n", "unknown key 'ctxx'; did you mean 'ctx'?"),
        ('threads = "2"\n', "threads must be a int, got '2'"),
        ("ctx = 100\n", "the context must be at least 256 tokens, got 100"),
        ("threads = -1\n", "threads must be 0 (one per core) or more, got -1"),
        ("flags = [1]\n", "flags must be a list of strings"),
        ("ctx = \n", "Invalid value"),
        ("model = 1\n", "model must be a str, got 1"),
    ],
)
def test_a_bad_llama_server_toml_says_what(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "llama-server.toml"
    path.write_text(text)
    with pytest.raises(RunError, match=message.replace("(", r"\(").replace(")", r"\)")):
        llama_settings(path, Options())


def test_a_second_instance_says_what_runs_and_how_to_reach_it(tmp_path: Path) -> None:
    first = Instance(tmp_path)
    first.acquire()
    try:
        second = Instance(tmp_path)
        with pytest.raises(Busy, match="another `make run` or `make serve` is starting"):
            second.acquire()
        line = bxctl_line(tmp_path / "my home", Path("/x/.venv/bin/bxctl"))
        assert line == f"BOXMAKER_HOME='{tmp_path}/my home' /x/.venv/bin/bxctl chat"
        sleeper = Server("loopd", [PY, "-c", LISTEN, str(tmp_path / "s.sock")],
                         tmp_path / "loopd.log", {})  # fmt: skip
        assert sleeper.wait_socket(tmp_path / "s.sock", timeout=60)  # it runs, its name is known
        first.write("serve", [sleeper], line)
        with pytest.raises(Busy) as caught:
            second.acquire()
        assert str(caught.value).startswith("`make serve` already runs in this checkout (loopd")
        assert f"Chat with it from here:  {line}\nor stop it with `make stop`." in str(caught.value)
    finally:
        first.release()
    Instance(tmp_path).acquire()  # free again once the first lets go
    assert stop_recorded(Instance(tmp_path)) == [f"loopd (pid {sleeper.pid})"]
    assert sleeper.process.wait(10) is not None
    assert stop_recorded(Instance(tmp_path)) == []  # nothing left to stop


def test_the_servers_hold_the_lock_after_the_launcher_lets_go(tmp_path: Path) -> None:
    instance = Instance(tmp_path)
    fd = instance.acquire()
    child = Server("loopd", [PY, "-c", "import time; time.sleep(60)"], tmp_path / "l.log", {},
                   keep_fds=(fd,))  # fmt: skip
    instance.release()  # `make serve` has exited
    try:
        with pytest.raises(Busy):
            Instance(tmp_path).acquire()
    finally:
        child.stop()
    Instance(tmp_path).acquire()


def test_a_pid_that_runs_another_program_is_not_stopped(tmp_path: Path) -> None:
    instance = Instance(tmp_path)
    other = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    try:
        record = {"mode": "serve", "started": "then", "servers": {"loopd": other.pid},
                  "args": {"loopd": "/usr/bin/loopd"}, "bxctl": ""}  # fmt: skip
        (tmp_path / "servers.json").write_text(json.dumps(record))
        assert stop_recorded(instance) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_port_in_use_is_seen(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_taken(port)
    assert not port_taken(port)


def test_a_built_server_that_dies_loading_the_model_fails_the_build_naming_the_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOXMAKER_CACHE", str(tmp_path))
    (tmp_path / "build").mkdir()
    dying = tmp_path / "llama-server"  # as the AMX build did: SIGSEGV while it loads the model
    dying.write_text("#!/bin/sh\necho 'loading model'\nkill -SEGV $$\n")
    dying.chmod(0o755)
    steps = Steps("llama-server", tmp_path / "build.log", total=1, err=io.StringIO())
    with pytest.raises(StepFailed) as failed:
        llama_build.smoke_test(steps, dying)
    assert "cannot run the model here: it ended with signal SIGSEGV" in str(failed.value)
    assert "loading model" in str(failed.value)  # the end of its output
    assert not llama_build.server_binary().exists()  # nothing was put in the cache


def test_make_gateway_without_a_matrix_section_says_what_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOXMAKER_RUN_DIR", str(tmp_path))
    assert main(["gateway"]) == 1
    said = capsys.readouterr().err
    assert f"make gateway: {tmp_path}/config.toml has no [gateway.matrix]" in said
    assert not (tmp_path / "servers.json").exists()  # nothing was started
