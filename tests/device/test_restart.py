"""Issue 21 on the real server: llama-server restarted in the middle of a conversation of
1,000+ tokens. With `[cache] save_dir` (and the server's `--slot-save-path` there) the next
turn is restored and processes only its new tokens; without, it processes everything and says
why (`cache_cold` before the answer, `cache_loss` with cause `server_restarted` after it)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from bxdev.llama import free_port, server_args

from boxmaker import SYSTEM_MD
from boxmaker.loopd.cache import FRESH_SECONDS

from ..processes import Process
from .conftest import DeviceStack, figure

# A long first message, so the conversation passes 1,000 tokens in two turns.
LONG = "Here are my notes; read them and say OK. " + " ".join(
    f"Note {n}: the box with label {n} holds {n * 3} screws and {n + 7} bolts." for n in range(40)
)


class RestartStack(DeviceStack):
    """The real server, brokerd and loopd; the server saves slots into `saves` when it is
    set."""

    def __init__(self, root: Path, saves: bool) -> None:  # DeviceStack's, with the saves
        self.root = root
        self.home = root / "home"
        self.env = {**os.environ, "BOXMAKER_HOME": str(self.home), "NO_COLOR": "1"}
        (root / "system.md").write_text(SYSTEM_MD.read_text())
        self.saves = root / "slots" if saves else None
        self.port = free_port()
        self.fake = self._server()  # the real server, in fact
        self.config = root / "config.toml"
        self.config.write_text(
            f'[server]\nbase_url = "http://127.0.0.1:{self.port}"\n'
            "[inference]\ntemperature = 0.0\nmax_tokens = 48\n"
            + (f'[cache]\nsave_dir = "{self.saves}"\n' if self.saves else "")
        )
        self.socket = self.home / "run" / "loop" / "loop.sock"
        self.workspace = self.home / "workspace"
        self.brokerd = self.start_brokerd()
        self.brokerd.err.wait_for("listening on", 60)
        self.loopd = self.start_loopd()
        self.loopd.err.wait_for("listening on", 300)

    def _server(self) -> Process:
        extra = []
        if self.saves is not None:
            self.saves.mkdir(exist_ok=True)
            extra = ["--slot-save-path", f"{self.saves}/"]
        server = Process(server_args(self.port, extra=extra), self.env, self.root)
        server.err.wait_for("listening on http://127.0.0.1", 300)
        return server

    def restart_server(self) -> None:
        self.fake.stop()
        self.fake = self._server()


def say(stack: DeviceStack, text: str, *options: str) -> str:
    result = stack.bxctl("--session", "restart", "--new", *options, "--say", text)
    assert result.returncode == 0, result.stderr
    return result.stdout


def event_types(json_lines: str) -> list[str]:
    """The event types of `bxctl --json`'s lines, in order."""
    lines = [json.loads(line) for line in json_lines.splitlines() if line.strip()]
    return [line["body"]["event"]["type"] for line in lines if line.get("kind") == "turn_event"]


def usages(stack: DeviceStack) -> list[dict[str, Any]]:
    return [r for r in stack.log("restart") if r["type"] == "usage"]


def talk_then_restart(stack: RestartStack) -> int:
    """Two turns passing 1,000 tokens, the server restarted, then a person's pause; the last
    prompt's size in tokens."""
    say(stack, LONG)
    say(stack, "Which box holds 30 screws?")
    before = usages(stack)[-1]
    if stack.saves is not None:  # the save runs after the turn, in the background: wait for it
        stack.loopd.err.wait_for("slot main: saved session restart (save 2:", 60)
    stack.restart_server()
    # The person's pause before the next message (not a wait for anything): loopd asks
    # /props before a request that comes FRESH_SECONDS or more after it last asked.
    time.sleep(FRESH_SECONDS)
    return int(before["cache_n"] + before["prompt_n"])


@pytest.mark.parametrize("saves", [True, False], ids=["with-saves", "without-saves"])
def test_a_server_restart_mid_conversation(tmp_path: Path, saves: bool) -> None:
    stack = RestartStack(tmp_path, saves)
    try:
        whole = talk_then_restart(stack)
        shown = event_types(say(stack, "Thank you.", "--json"))
        after = usages(stack)[-1]
        losses = [r for r in stack.log("restart") if r["type"] == "cache_loss"]
    finally:
        stack.stop()
    label = "with a save folder" if saves else "without a save folder"
    figure(
        f"server restart {label}: the prompt before it {whole} tokens; the turn after it "
        f"prompt_n={after['prompt_n']}, cache_n={after['cache_n']}"
        + (f"; cache_loss cause {losses[-1].get('cause')}" if losses else "; no cache_loss")
        + ("; cache_cold before the answer" if "cache_cold" in shown else "")
    )
    assert whole >= 1000
    if saves:
        assert after["cache_n"] >= whole
        assert after["prompt_n"] < 100
        assert losses == []
    else:
        assert after["cache_n"] < 100
        assert [loss["cause"] for loss in losses] == ["server_restarted"]
    # Said before the answer, and only when nothing restored the prefix.
    if saves:
        assert "cache_cold" not in shown, shown
    else:
        assert shown.count("cache_cold") == 1, shown
        assert shown.index("cache_cold") < shown.index("content"), shown


@pytest.mark.parametrize("saves", [True, False], ids=["with-saves", "without-saves"])
def test_a_server_restart_before_an_epoch_s_summary(tmp_path: Path, saves: bool) -> None:
    stack = RestartStack(tmp_path, saves)
    try:
        whole = talk_then_restart(stack)
        shown = event_types(say(stack, "Start afresh, please.", "--new-epoch", "--json"))
        [end] = [r for r in stack.log("restart") if r["type"] == "epoch_end"]
    finally:
        stack.stop()
    label = "with a save folder" if saves else "without a save folder"
    figure(
        f"server restart, then a new epoch, {label}: the prompt before it {whole} tokens; "
        f"the summary request ({end['carried_turns']} turn(s) carried) prompt_n="
        f"{end['prompt_n']}, cache_n={end['cache_n']}"
        + ("; cache_cold before epoch_start" if "cache_cold" in shown else "")
    )
    assert whole >= 1000
    if saves:  # restored: the summary shares the conversation's start, which the server reused
        assert end["cache_n"] >= 900
        assert end["prompt_n"] < 150  # the instruction alone (about 100 tokens) and a few
        assert "cache_cold" not in shown, shown
    else:
        assert end["cache_n"] < 100
        assert shown.count("cache_cold") == 1, shown
        assert shown.index("cache_cold") < shown.index("epoch_start"), shown
