"""bxctl chat on a real pseudo-terminal, as a person uses it: the line editor, pastes, history,
commands, the streamed `--say` and the status line, against loopd and the fake server."""

from __future__ import annotations

import os
import signal
import stat
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from .processes import BIN, Stack, Terminal

REPLIES = ["One.", "Two.", "Three.", "Four.", "Five."]
LONG = " ".join(f"word{i}" for i in range(60))


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    script = {"replies": [{"content": r} for r in REPLIES], "default": {"content": "More."}}
    running = Stack(tmp_path, script, "--n-ctx", "100000")
    try:
        yield running
    finally:
        running.stop()


def users(stack: Stack, session: str) -> list[str]:
    return [r["content"] for r in stack.log(session) if r["type"] == "user"]


def test_a_person_at_the_terminal(stack: Stack) -> None:
    term = Terminal([str(BIN / "bxctl"), "chat", "--session", "t1"], stack.env)
    try:
        term.wait_for("session t1")
        at = term.wait_for_prompt()
        term.type("first line\r")
        at = term.wait_for_prompt(term.wait_for("One.", start=at))
        term.type("\x1b[A")  # up: the previous line comes back, and Enter sends it again
        term.wait_for("first line", start=at + 1)
        term.type("\r")
        at = term.wait_for_prompt(term.wait_for("Two.", start=at))
        term.paste("one\ntwo\nthree")  # a three-line paste is one turn
        term.type("\r")
        at = term.wait_for_prompt(term.wait_for("Three.", start=at))
        pasted = "".join(chr(ord("a") + i % 26) for i in range(20_000))
        term.paste(pasted)
        term.type("\r")
        at = term.wait_for_prompt(term.wait_for("Four.", start=at))
        term.type("/help\r")
        at = term.wait_for_prompt(term.wait_for("Commands:", start=at))
        term.type("/what\r")
        at = term.wait_for_prompt(term.wait_for("/what is not a command", start=at))
        term.type("/stats\r")
        at = term.wait_for_prompt(term.wait_for("reused from the cache", start=at))
        term.type("/sessions\r")  # the session listing, from the files
        listed = term.wait_for("FIRST MESSAGE", start=at)
        at = term.wait_for_prompt(term.wait_for("t1  ", start=listed))
        term.type('"""\rblock one\rblock two\r"""\r')
        # The fake answers requests in order: "Five." here means the commands sent none.
        at = term.wait_for_prompt(term.wait_for("Five.", start=at))
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
    assert users(stack, "t1") == [
        "first line", "first line", "one\ntwo\nthree", pasted, "block one\nblock two"
    ]  # fmt: skip
    history = stack.root / "state" / "boxmaker" / "bxctl-history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "+block two" in history.read_text()


def test_say_streams_on_a_terminal_and_the_status_line_leaves_no_trace(tmp_path: Path) -> None:
    slow = Stack(tmp_path, {"default": {"content": LONG}}, "--ms-per-token", "40",
                 "--prompt-ms-per-token", "2")  # fmt: skip
    term = Terminal([str(BIN / "bxctl"), "chat", "--session", "s1", "--say", "Talk."], slow.env)
    try:
        term.wait_for("tokens (0 from the cache) · 0.")  # the status line, before the answer
        term.wait_for("word3")
        assert os.waitpid(term.pid, os.WNOHANG) == (0, 0)  # still streaming: 56 words to go
        term.wait_for("word59")
        assert term.exit_code() == 0
    finally:
        term.kill()
        slow.stop()
    # The status line was erased before the answer, which starts at the line's beginning.
    assert "\r\x1b[K" + "word0" in term.raw
    assert term.screen.rstrip().endswith("word59")


def test_a_sigint_at_the_prompt_leaves_the_terminal_as_it_was(stack: Stack) -> None:
    term = Terminal([str(BIN / "bxctl"), "chat"], stack.env)
    try:
        cooked = termios.tcgetattr(term.fd)[3]
        term.wait_for_prompt()
        assert not termios.tcgetattr(term.fd)[3] & termios.ICANON  # the editor reads it raw
        os.kill(term.pid, signal.SIGINT)  # not a key: a signal, as `kill -INT` sends
        _, status = os.waitpid(term.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert termios.tcgetattr(term.fd)[3] == cooked  # given back as it was
    finally:
        term.kill()
