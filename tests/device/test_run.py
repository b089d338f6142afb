"""`make run`, driven through a pseudo-terminal as a person would use it."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from ..processes import Terminal
from .conftest import figure


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


def run_once(root: Path, line: str) -> tuple[str, float]:
    env = {**os.environ, "BOXMAKER_RUN_DIR": str(root), "NO_COLOR": "1"}
    started = time.monotonic()
    term = Terminal([sys.executable, "-m", "bxdev.run"], env)
    try:
        at = term.wait_for("> ", timeout=300)
        ready = time.monotonic() - started
        term.type(line + "\n")
        at = term.wait_for("> ", start=at + 2)  # the answer, then the next prompt
        term.type("/quit\n")
        term.wait_for("stopped loopd and llama-server", start=at)
        assert term.exit_code() == 0
    finally:
        term.kill()
    return term.screen, ready


def test_make_run_gives_a_working_chat_and_keeps_sessions(tmp_path: Path) -> None:
    first, ready = run_once(tmp_path, "Hello, who are you?")
    assert "session chat-" in first
    assert "[prompt " in first  # the live progress line of a terminal
    screen = re.sub(r"\r|\x1b\[K", "", first)
    figure(f"make run: chat ready in {ready:.1f} s; the screen:\n{screen}")
    second, ready_again = run_once(tmp_path, "Hello again.")
    figure(f"make run again: chat ready in {ready_again:.1f} s")
    sessions = sorted(os.listdir(tmp_path / "home" / "sessions"))
    assert len(sessions) == 2  # kept across runs
    assert (tmp_path / "config.toml").exists()
    for screen in (first, second):
        pids = started_pids(screen)
        assert sorted(pids) == ["llama-server", "loopd"]
        assert [name for name, pid in pids.items() if running(pid)] == []  # both stopped
