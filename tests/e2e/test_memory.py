"""Memory end to end, through real `loopd serve` and `brokerd serve` processes and the fake
llama-server: a note the model keeps in one session is recalled in another, by the model's
own `recall` and by auto-recall before the first request; loopd tells brokerd of each turn and
brokerd's index follows in the background; `bxctl memory` reads and writes the same files
meanwhile, and a rebuilt index answers the same."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bxdev.processes import WAIT_S

from boxmaker import proto as p

from ..helpers import read_log
from ..processes import BIN, Stack, wait_until

SCRIPT = {
    "replies": [
        # Session m1: the model keeps a note, then answers.
        {"tool_calls": [["remember", json.dumps({"text": "The owner's boat is named Heron."})]]},
        {"content": "I will remember that."},
        # Session m2: auto-recall has run first; the model recalls, then answers.
        {"tool_calls": [["recall", json.dumps({"query": "boat name"})]]},
        {"content": "Your boat is Heron."},
    ],
    "default": {"content": "More?"},
}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path, SCRIPT, "--n-ctx", "100000")
    try:
        yield running
    finally:
        running.stop()


def records(stack: Stack, session: str) -> list[p.LogRecord]:
    return read_log(stack.home / "sessions" / session / "0.jsonl")


def memory(stack: Stack, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "bxctl"), "memory", *words], env=stack.env,
                          capture_output=True, text=True, timeout=WAIT_S, check=False)  # fmt: skip


def test_a_note_kept_in_one_session_is_recalled_in_another(stack: Stack) -> None:
    said = stack.bxctl("--session", "m1", "--say", "Remember: my boat is named Heron.")
    assert (said.returncode, said.stdout) == (0, "I will remember that.\n"), said.stderr
    listed = memory(stack, "ls")
    assert "n1" in listed.stdout
    assert "m1, turn 1" in listed.stdout
    said = stack.bxctl("--session", "m2", "--new", "--say", "What is the name of my boat?")
    assert (said.returncode, said.stdout) == (0, "Your boat is Heron.\n"), said.stderr
    second: list[Any] = records(stack, "m2")
    kinds = [p.unstructure(r)["type"] for r in second]
    assert kinds[:4] == ["session_start", "user", "recall", "assistant"]
    auto = second[2]
    assert isinstance(auto, p.RecallRecord)
    assert auto.query == "name boat"
    assert "note n1" in auto.content
    assert "The owner's boat is named Heron." in auto.content
    result = next(r for r in second if isinstance(r, p.ToolResultRecord))
    assert "The owner's boat is named Heron." in result.content
    assert not result.untrusted


def test_brokerd_s_index_follows_each_turn_and_a_rebuild_answers_the_same(stack: Stack) -> None:
    said = stack.bxctl("--session", "m1", "--say", "The lighthouse keeper is Ana.")
    assert said.returncode == 0, said.stderr
    index = stack.home / "memory" / "index.sqlite"
    # loopd told brokerd after the turn: its index has the session's turn, read in the
    # background (nothing asked for it).
    wait_until(lambda: b"lighthouse" in index.read_bytes() if index.exists() else False,
               "brokerd's index to hold the turn")  # fmt: skip
    before = memory(stack, "search", "lighthouse keeper").stdout
    assert "session m1, turn 1" in before
    rebuilt = memory(stack, "reindex")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert memory(stack, "search", "lighthouse keeper").stdout == before
    index.unlink()  # deleting it loses nothing: the next search makes it again
    assert memory(stack, "search", "lighthouse keeper").stdout == before
