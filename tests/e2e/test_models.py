"""End to end, the model profiles and the server kinds: `loopd serve` chooses a profile from
what the (fake) server says it serves, says which and why, and runs turns with it; and it
serves from an OpenAI-style server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..helpers import read_log
from ..processes import Stack

BLOCK = '```tool\n{"name": "echo", "arguments": {"text": "hi"}}\n```'
SMOLLM2 = ("--model", "/models/SmolLM2-135M-Instruct.Q4_1.gguf", "--no-tool-calls")


@pytest.fixture
def fenced(tmp_path: Path) -> Iterator[Stack]:
    script = {"replies": [{"content": "Sure. " + BLOCK}, {"content": "hi"}]}
    running = Stack(tmp_path, script, *SMOLLM2)
    try:
        yield running
    finally:
        running.stop()


def test_auto_picks_the_small_model_s_fenced_profile_and_says_why(fenced: Stack) -> None:
    said = fenced.loopd.err.text()
    assert (
        "self-test ok   model profile: smollm2-135m, tools fenced (all); auto: the server "
        "serves smollm2-135m-instruct.q4_1.gguf ('smollm2-135m'); context 4096 tokens "
        "(the server's)"
    ) in said
    assert "self-test ok   baseline budget: " in said


def test_a_fenced_turn_runs_its_tool_block_and_never_shows_it(fenced: Stack) -> None:
    result = fenced.bxctl("--session", "f1", "--json", "--say", "Echo hi.")
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    events = [f["body"]["event"] for f in frames if f["kind"] == "turn_event"]
    shown = "".join(e["text"] for e in events if e["type"] == "content")
    assert shown == "Sure. hi"
    assert {"type": "tool_call_started", "name": "echo", "summary": '{"text":"hi"}'} in events
    assert frames[-1]["body"]["content"] == "hi"
    folder = fenced.home / "sessions" / "f1"
    assert json.loads((folder / "0.baseline.json").read_text())["fenced"]["results"] == "user"
    records = read_log(folder / "0.jsonl")
    assert [type(r).__name__ for r in records][3:6] == [
        "UsageRecord", "CallSentRecord", "ToolResultRecord",
    ]  # fmt: skip


@pytest.fixture
def openai(tmp_path: Path) -> Iterator[Stack]:
    script = {
        "replies": [
            {"content": "Ok."},  # the self-test's one-token completion counting the baseline
            {"tool_calls": [["clock", "{}"]]},
            {"content": "It is late."},
        ]
    }
    running = Stack(tmp_path, script, "--kind", "openai", "--model", "Meta-Llama-3.1-8B",
                    config='kind = "openai"\n')  # fmt: skip
    try:
        yield running
    finally:
        running.stop()


def test_loopd_serves_from_an_openai_style_server(openai: Stack) -> None:
    said = openai.loopd.err.text()
    assert "self-test ok   openai: http://127.0.0.1:" in said
    assert (
        "model profile: native, tools native (core); auto: no profile matches the model "
        "meta-llama-3.1-8b; the server does not say whether its template makes tool calls"
    ) in said
    assert (
        "baseline budget: 2037 tokens of at most 3000, by the usage of a one-token completion "
        "(the server has no tokenizer route)"
    ) in said
    result = openai.bxctl("--session", "o1", "--say", "What time is it?")
    assert (result.returncode, result.stdout) == (0, "It is late.\n"), result.stderr
    kinds = [r["type"] for r in openai.log("o1")]
    assert kinds == ["session_start", "user", "assistant", "usage", "call_sent", "tool_result",
                     "assistant", "usage", "turn_end"]  # fmt: skip
