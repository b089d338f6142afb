"""`make run`, driven through a pseudo-terminal as a person would use it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bxdev import llama_build

from ..processes import QUIET_EDITOR, Terminal
from .conftest import figure

REPO = Path(__file__).parent.parent.parent


def started_pids(screen: str) -> dict[str, int]:
    """The servers `make run` says it started, by name."""
    return {name: int(pid) for name, pid in re.findall(r"started (\S+) \(pid (\d+)\)", screen)}


def running(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def environ(root: Path) -> dict[str, str]:
    return {**os.environ, "BOXMAKER_RUN_DIR": str(root), "NO_COLOR": "1", **QUIET_EDITOR,
            "XDG_STATE_HOME": str(root / "state")}  # fmt: skip


def make(root: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`make` as a person types it in the checkout (not as a sub-make of `make
    verify-device`, which would say which folder it enters); `stdin`, lines for the chat."""
    env = {k: v for k, v in environ(root).items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          input=stdin, timeout=300)  # fmt: skip


def run_once(root: Path, line: str) -> tuple[str, float]:
    started = time.monotonic()
    term = Terminal([sys.executable, "-m", "bxdev.run"], environ(root))
    try:
        at = term.wait_for_prompt(timeout=300)
        ready = time.monotonic() - started
        term.type(line + "\r")
        at = term.wait_for_prompt(at + 1)  # the answer, then the next prompt
        term.type("/quit\r")
        term.wait_for("stopped loopd, brokerd and llama-server", start=at)
        assert term.exit_code() == 0
    finally:
        term.kill()
    return term.screen, ready


def test_make_run_gives_a_working_chat_and_keeps_sessions(tmp_path: Path) -> None:
    first, ready = run_once(tmp_path, "Hello, who are you?")
    assert "session chat-" in first
    assert "from the cache) · " in first  # the live status line of a terminal
    screen = re.sub(r"\r|\x1b\[K", "", first)
    figure(f"make run: chat ready in {ready:.1f} s; the screen:\n{screen}")
    second, ready_again = run_once(tmp_path, "Hello again.")
    figure(f"make run again: chat ready in {ready_again:.1f} s")
    sessions = sorted(os.listdir(tmp_path / "home" / "sessions"))
    assert len(sessions) == 2  # kept across runs
    assert (tmp_path / "config.toml").exists()
    for screen in (first, second):
        pids = started_pids(screen)
        assert sorted(pids) == ["brokerd", "llama-server", "loopd"]
        assert [name for name, pid in pids.items() if running(pid)] == []  # both stopped


def test_make_run_with_json_prints_nothing_but_frames_on_stdout(tmp_path: Path) -> None:
    result = make(tmp_path, "run", "ARGS=--json --say Hi")
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    assert frames[0]["kind"] == "session"
    assert (frames[-1]["kind"], frames[-1]["final"]) == ("turn_done", True)
    assert "make run: ready in" in result.stderr


def test_make_serve_is_reached_from_another_terminal_and_a_second_instance_says_so(
    tmp_path: Path,
) -> None:
    served = make(tmp_path, "serve")
    try:
        assert served.returncode == 0, served.stderr
        line = served.stdout.strip()
        assert line.startswith(f"BOXMAKER_HOME={tmp_path}/home ")
        assert line.endswith("/.venv/bin/bxctl chat")
        said = subprocess.run(f"{line} --say Hello", shell=True, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert said.returncode == 0, said.stderr
        assert said.stdout.strip()
        second = make(tmp_path, "run", "ARGS=--say Hi")
        assert second.returncode != 0
        assert "`make serve` already runs in this checkout" in second.stderr
        assert f"Chat with it from here:  {line}" in second.stderr
    finally:
        stopped = make(tmp_path, "stop")
    assert "make stop: stopped loopd (pid " in stopped.stderr
    assert [pid for pid in started_pids(served.stderr).values() if running(pid)] == []


def test_make_run_with_a_model_file_of_your_own_reaches_the_first_answer(tmp_path: Path) -> None:
    model = llama_build.model_path()  # the shipped GGUF, passed as a person passes their own
    began = time.monotonic()
    ran = make(tmp_path, "run", f"MODEL={model}", "ARGS=--session own-1", stdin="Hello!\n")
    took = time.monotonic() - began
    assert ran.returncode == 0, ran.stderr
    assert f"with {model.name}, 4096 tokens of context" in ran.stderr
    pids = started_pids(ran.stderr)
    assert sorted(pids) == ["brokerd", "llama-server", "loopd"]
    assert [name for name, pid in pids.items() if running(pid)] == []  # all stopped
    log = (tmp_path / "home" / "sessions" / "own-1" / "0.jsonl").read_text().splitlines()
    answers = [record for record in map(json.loads, log) if record["type"] == "assistant"]
    assert answers  # the model answered
    assert ran.stdout.strip()  # and the chat showed it
    figure(f"make run MODEL=<the shipped GGUF>: the first answer and the servers stopped in "
           f"{took:.1f} s; it said: {ran.stdout.strip()[:200]!r}")  # fmt: skip
