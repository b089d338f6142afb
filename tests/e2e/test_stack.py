"""End to end with processes: the fake llama-server on TCP, `loopd serve`, and `bxctl chat`."""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker import proto as p

from ..helpers import read_log
from ..processes import BIN, Stack, Terminal

SCRIPT = {
    "replies": [
        {"content": "Hello, I am Boxmaker."},
        {"tool_calls": [["clock", "{}"]]},
        {"content": "It is evening."},
    ],
    "default": {"content": "Anything else?"},
}
LONG = " ".join(f"word{i}" for i in range(60))


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path, SCRIPT)
    try:
        yield running
    finally:
        running.stop()


def test_say_json_and_resume(stack: Stack) -> None:
    said = stack.bxctl("--session", "s1", "--say", "Hello?")
    assert (said.returncode, said.stdout) == (0, "Hello, I am Boxmaker.\n")
    assert said.stderr == "session s1\n"
    as_json = stack.bxctl("--session", "s1", "--json", "--say", "What time is it?")
    assert (as_json.returncode, as_json.stderr) == (0, "")
    frames = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert frames[0] == {"kind": "session", "final": False, "body": {"session": "s1"}}
    started = {"event": {"type": "tool_call_started", "name": "clock"}}
    assert {"kind": "turn_event", "final": False, "body": started} in frames
    assert (frames[-1]["kind"], frames[-1]["final"]) == ("turn_done", True)
    assert frames[-1]["body"]["content"] == "It is evening."
    assert frames[-1]["body"]["usage"]["cache_n"] > 0  # the resumed session hit the cache
    kinds = [r["type"] for r in stack.log("s1")]
    assert kinds == ["session_start", "user", "assistant", "usage", "turn_end", "user",
                     "assistant", "usage", "call_sent", "tool_result", "assistant", "usage",
                     "turn_end"]  # fmt: skip
    assert stat.S_IMODE(stack.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(stack.socket.parent.stat().st_mode) == 0o700


def test_a_new_session_and_errors_as_one_line(stack: Stack) -> None:
    said = stack.bxctl("--say", "Hi")
    assert said.returncode == 0
    session = said.stderr.removeprefix("session ").strip()
    assert session.startswith("chat-")
    missing = stack.bxctl("--socket", str(stack.root / "nope.sock"), "--say", "Hi")
    assert missing.returncode == 3
    assert missing.stderr.startswith("error: no loopd is listening on")  # and no session line
    assert "Traceback" not in missing.stderr


def test_a_second_loopd_on_the_same_socket_is_refused(stack: Stack) -> None:
    second = stack.start_loopd()
    assert second.wait() == 1
    assert f"another loopd (pid {stack.loopd.popen.pid}) is already serving" in second.err.text()
    second.stop()
    assert stack.bxctl("--say", "Still there?").returncode == 0


def test_serve_refuses_when_the_self_test_fails(tmp_path: Path) -> None:
    (tmp_path / "system.md").write_text("hi\n")
    config = tmp_path / "config.toml"
    config.write_text('[server]\nbase_url = "http://127.0.0.1:9"\nconnect_timeout_s = 0.3\n'
                      f'[paths]\nhome = "{tmp_path}/home"\n')  # fmt: skip

    def serve() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "loopd"), "serve", "--config", str(config)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    result = serve()
    assert result.returncode == 1
    assert "FAIL llama-server: http://127.0.0.1:9/health did not answer 200" in result.stderr
    assert "self-test failed; loopd is not starting" in result.stderr
    assert not (tmp_path / "home" / "run" / "loop" / "loop.sock").exists()
    (tmp_path / "system.md").unlink()
    missing = serve()
    assert missing.returncode == 1
    assert "FAIL system.md" in missing.stderr


def test_serve_refuses_a_baseline_over_its_budget(stack: Stack) -> None:
    config = stack.root / "small.toml"
    config.write_text(
        stack.config.read_text() + f'[paths]\nhome = "{stack.root}/small"\n'
        "[baseline]\nmax_tokens = 5\n"
    )
    result = subprocess.run([str(BIN / "loopd"), "serve", "--config", str(config)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1
    assert re.search(
        r"FAIL baseline budget: the baseline is \d+ tokens, over the budget of 5 "
        r"\(\[baseline\] max_tokens\)",
        result.stderr,
    ), result.stderr
    assert "self-test failed; loopd is not starting" in result.stderr
    assert not (stack.root / "small" / "run" / "loop" / "loop.sock").exists()


@pytest.mark.parametrize("level", ["info", "debug"])
def test_message_text_is_logged_only_at_debug(tmp_path: Path, level: str) -> None:
    running = Stack(tmp_path, SCRIPT, loopd_args=("--log-level", level))
    try:
        said = running.bxctl("--session", "s1", "--say", "My secret plan is tea.")
        assert said.returncode == 0
        running.loopd.stop()
        logged = running.loopd.err.text()
    finally:
        running.stop()
    assert "turn s1: done" in logged  # the turn's own line is there at every level
    shown = ["My secret plan is tea.", "Hello, I am Boxmaker."]
    assert [text in logged for text in shown] == [level == "debug"] * 2


@pytest.mark.parametrize("grace", ["10", "0"])
def test_sigterm_during_a_turn_ends_cleanly_with_the_log_valid(tmp_path: Path, grace: str) -> None:
    slow = Stack(tmp_path, {"default": {"content": LONG}}, "--ms-per-token", "40",
                 loopd_args=("--grace", grace))  # fmt: skip
    try:
        chat = slow.bxctl_process("--session", "s1", "--json", "--say", "Talk.")
        chat.out.wait_for('"type":"content"')  # the turn is streaming
        slow.loopd.popen.send_signal(signal.SIGTERM)
        assert slow.loopd.wait() == 0
        assert "SIGTERM: stopping" in slow.loopd.err.text()
        code = chat.wait()
        log = slow.home / "sessions" / "s1" / "0.jsonl"
        records = read_log(log)  # whole lines, every one a record, the chain whole
        if grace == "10":  # the turn had time to finish
            assert code == 0
            assert json.loads(chat.out.lines[-1])["body"]["content"] == LONG
            assert isinstance(records[-2], p.UsageRecord)
            assert records[-1].outcome is p.Outcome.DONE  # type: ignore[union-attr]
        else:  # cancelled: nothing appended for the unfinished completion
            assert code == 4, (chat.out.text(), chat.err.text())  # the connection was lost
            assert json.loads(chat.out.lines[-1])["body"]["code"] == "connection_lost"
            assert [type(r).__name__ for r in records] == [
                "SessionStartRecord", "UserRecord", "TurnEndRecord",
            ]  # fmt: skip
            assert records[-1].outcome is p.Outcome.CANCELLED  # type: ignore[union-attr]
        assert not slow.socket.exists()
        chat.stop()
    finally:
        slow.stop()


def test_an_interactive_chat_on_a_terminal_with_ctrl_c_mid_turn(tmp_path: Path) -> None:
    slow = Stack(tmp_path, {"replies": [{"content": LONG}], "default": {"content": "Short."}},
                 "--ms-per-token", "40")  # fmt: skip
    term = Terminal([str(BIN / "bxctl"), "chat", "--session", "t1"], slow.env)
    try:
        term.wait_for("session t1")
        term.wait_for_prompt()
        term.type("Tell me everything.\r")
        term.wait_for("word3")  # streaming
        term.type("\x03")  # Ctrl-C: the turn is cancelled, the chat goes on
        at = term.wait_for("[turn cancelled]")
        term.wait_for_prompt(at)
        term.type("Short answer please.\r")
        at = term.wait_for("Short.", start=at)
        term.wait_for_prompt(at)
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
        slow.stop()
    log = slow.log("t1")
    kinds = [r["type"] for r in log]
    assert kinds == [  # the cut one left no answer, and says it was cancelled
        "session_start", "user", "turn_end", "user", "assistant", "usage", "turn_end",
    ]  # fmt: skip
    assert [r["outcome"] for r in log if r["type"] == "turn_end"] == ["cancelled", "done"]
    assert "word59" not in term.screen


def test_ctrl_c_at_the_prompt_exits(stack: Stack) -> None:
    term = Terminal([str(BIN / "bxctl"), "chat"], stack.env)
    try:
        term.wait_for_prompt()
        term.type("\x03")
        assert term.exit_code() == 0
    finally:
        term.kill()
