"""bxctl chat on a real pseudo-terminal, as a person uses it: the line editor, pastes, history,
commands, the streamed `--say` and the status line, against loopd and the fake server."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
from bxdev.processes import WAIT_S, Lines

from ..processes import BIN, Stack, Terminal, wait_until

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
        subprocess.run([BIN / "bxctl", "memory", "add", "The kettle is blue.", "--pin"],
                       env=stack.env, check=True, timeout=WAIT_S, capture_output=True)  # fmt: skip
        term.type("/memory\r")  # the notes, from their file
        at = term.wait_for_prompt(term.wait_for("The kettle is blue.", start=at))
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


# --- steering a running turn ---------------------------------------------------------


def kinds(stack: Stack, session: str) -> list[str]:
    return [r["type"] for r in stack.log(session)]


@pytest.fixture
def steer_stack(tmp_path: Path) -> Iterator[Stack]:
    script = {"replies": [{"tool_calls": [["clock", "{}"]]}, {"content": "Noted, in UTC."}],
              "default": {"content": "More."}}  # fmt: skip
    running = Stack(tmp_path, script, "--n-ctx", "100000")
    try:
        yield running
    finally:
        running.stop()


def held_turn(stack: Stack, session: str, message: str) -> Terminal:
    """bxctl chat at a terminal, its first turn held at the server (another client's task has
    the slot) until the test releases it."""
    term = Terminal([str(BIN / "bxctl"), "chat", "--session", session], stack.env)
    term.wait_for(f"session {session}")
    term.wait_for_prompt()
    stack.hold()
    term.type(message + "\r")
    term.wait_for("is busy with another client")  # loopd's waiting: the turn runs, held
    return term


def test_a_line_typed_during_a_turn_is_a_soft_break_taken_between_two_steps(
    steer_stack: Stack,
) -> None:
    term = held_turn(steer_stack, "t1", "What time is it?")
    try:
        typed = len(term.screen)
        term.type("In UTC, please.")  # the first key opens the steering line
        term.wait_for("In UTC, please.", start=term.wait_for("queue>", start=typed))
        term.type("\r")
        queued = term.wait_for("[queued: the model reads it after its current step]", start=typed)
        steer_stack.release()
        taken = term.wait_for("[the model takes the queued message into this turn]", start=queued)
        term.wait_for_prompt(term.wait_for("Noted, in UTC.", start=taken))
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
    assert term.screen.count("Noted, in UTC.") == 1  # the turn is shown once, not per message
    assert kinds(steer_stack, "t1")[1:] == [
        "user", "assistant", "usage", "call_sent", "tool_result",  # the first step: the clock
        "break", "user",  # the message, taken at the step boundary
        "assistant", "usage", "turn_end",
    ]  # fmt: skip
    assert users(steer_stack, "t1") == ["What time is it?", "In UTC, please."]


def test_ctrl_c_then_enter_with_text_is_a_hard_break(stack: Stack) -> None:
    term = held_turn(stack, "t2", "Write a very long essay.")
    try:
        typed = len(term.screen)
        term.type("Stop. Just say hi.")
        line = term.wait_for("Stop. Just say hi.", start=term.wait_for("queue>", start=typed))
        term.type("\x03")  # Ctrl-C with text: the message becomes a hard break
        term.wait_for("Stop. Just say hi.", start=term.wait_for("stop>", start=line))
        term.type("\r")
        stopped = term.wait_for("[stopped by a hard break]", start=typed)
        stack.release()
        # "One." went to the cut request: the fake takes a reply as a request comes.
        term.wait_for_prompt(term.wait_for("Two.", start=stopped))
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
    log = stack.log("t2")
    assert [r["type"] for r in log][1:] == [
        "user", "break", "turn_end",  # cut while it waited for the server: nothing of it kept
        "user", "assistant", "usage", "turn_end",
    ]  # fmt: skip
    assert (log[2]["hard"], log[2]["at"], log[3]["outcome"]) == (True, "completion", "break_hard")
    assert users(stack, "t2") == ["Write a very long essay.", "Stop. Just say hi."]


def test_a_turn_that_ends_while_a_message_is_typed_leaves_it_at_the_prompt(stack: Stack) -> None:
    term = held_turn(stack, "t5", "First.")
    try:
        typed = len(term.screen)
        term.type("half a")
        term.wait_for("half a", start=term.wait_for("queue>", start=typed))
        stack.release()
        answered = term.wait_for("One.", start=typed)
        prompt = term.wait_for_prompt(answered)
        term.wait_for("half a", start=prompt)  # the prompt shows it, still to be sent
        term.type(" thought.\r")
        term.wait_for_prompt(term.wait_for("Two.", start=prompt))
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
    assert users(stack, "t5") == ["First.", "half a thought."]
    assert "break" not in kinds(stack, "t5")


def test_ctrl_c_on_an_empty_steering_line_cancels_the_turn(stack: Stack) -> None:
    term = held_turn(stack, "t3", "Write a very long essay.")
    try:
        typed = len(term.screen)
        term.type("x\x7f")  # a key opens the line; backspace leaves it empty
        term.wait_for("queue>", start=typed)
        term.type("\x03")
        cancelled = term.wait_for("[turn cancelled]", start=typed)
        # bxctl says so once it has left; loopd ends the turn when it sees the channel go.
        # Released before that, the held completion could still be answered and kept.
        wait_until(lambda: kinds(stack, "t3")[-1:] == ["turn_end"], "t3's turn_end")
        stack.release()
        term.wait_for_prompt(cancelled)
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
    assert kinds(stack, "t3")[1:] == ["user", "turn_end"]
    assert stack.log("t3")[-1]["outcome"] == "cancelled"


def test_piped_input_for_a_busy_session_waits_in_its_mailbox(stack: Stack) -> None:
    term = held_turn(stack, "t4", "First, at the terminal.")
    try:
        with subprocess.Popen(
            [str(BIN / "bxctl"), "chat", "--session", "t4"], env=stack.env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        ) as piped:  # fmt: skip
            try:
                assert piped.stdin is not None
                assert piped.stdout is not None
                out = Lines(piped.stdout)
                piped.stdin.write("Second, piped.\n")
                piped.stdin.close()
                out.wait_for("[queued behind 1 message in the session: it runs when they are done]")
                stack.release()
                term.wait_for_prompt(term.wait_for("One."))
                assert piped.wait(timeout=WAIT_S) == 0
                out.wait_for("Two.")
            finally:
                if piped.poll() is None:
                    piped.kill()
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
    assert users(stack, "t4") == ["First, at the terminal.", "Second, piped."]
    assert [r["outcome"] for r in stack.log("t4") if r["type"] == "turn_end"] == ["done", "done"]
