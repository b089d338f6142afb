"""`make verify-device`: a conversation that never dies, on the real server with a small
context (`-c 1024`): a message too long for it, turns across four epochs, and a loopd
restart in the middle of one.

Every turn goes through `bxctl chat --say` to a real `loopd serve`, as a person runs them. The
figures are read from the logs: within an epoch, each request processes only the tokens new to
the server (the summary request too: it asks for what the slot holds, then the instruction);
the first request of each epoch is the one miss.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from boxmaker.cli.commands import EXIT_CODES
from boxmaker.config import load_config
from boxmaker.layout import epochs_in
from boxmaker.loopd.infer import Client
from boxmaker.proto import ErrorCode
from boxmaker.session import SUMMARY_INSTRUCTION

from ..helpers import read_log
from ..processes import BIN
from .conftest import DeviceStack, figure

CTX = 1024
MAX_TURNS = 150  # the conversation's turns at most, to its fourth epoch
QUESTIONS = [
    "Name a colour.", "Name a fruit.", "Count to three.", "Name a city.", "Name a river.",
    "Name an animal.", "Say something kind.", "Name a planet.", "Name a tree.", "Name a tool.",
]  # fmt: skip


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeviceStack]:
    stack = DeviceStack(tmp_path_factory.mktemp("epochs"), ctx=CTX)
    try:
        yield stack
    finally:
        stack.stop()


def chat(device: DeviceStack, session: str, text: str) -> subprocess.CompletedProcess[str]:
    """One turn by `bxctl chat --say`; a turn that opens an epoch asks for two completions,
    which on a busy machine take a while."""
    return subprocess.run(
        [str(BIN / "bxctl"), "chat", "--session", session, "--new", "--say", text],
        env=device.env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def epochs(device: DeviceStack, session: str) -> list[list[dict[str, Any]]]:
    folder = device.home / "sessions" / session
    return [
        [json.loads(line) for line in (folder / f"{n}.jsonl").read_text().splitlines()]
        for n in epochs_in(p.name for p in folder.iterdir())
    ]


def own(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An epoch's own records: after its summary and the turns it carried."""
    if len(records) < 2 or records[1]["type"] != "epoch_start":
        return records
    at, left = (3 if records[2]["type"] == "summary" else 2), records[1]["carried_turns"]
    while left:
        left -= records[at]["type"] == "turn_end"
        at += 1
    return records[at:]


def new_tokens(before: dict[str, Any], after: dict[str, Any]) -> int:
    """The tokens of `after`'s prompt that the server did not hold after `before`: it holds the
    prompt and what it generated, less the last token (sampled, never evaluated)."""
    held = before["cache_n"] + before["prompt_n"] + before["predicted_n"] - 1
    return after["cache_n"] + after["prompt_n"] - held


def test_a_message_too_long_is_refused_with_its_size_and_the_next_is_answered(
    small: DeviceStack,
) -> None:
    assert chat(small, "full", "Hello!").returncode == 0
    log = small.home / "sessions" / "full" / "0.jsonl"
    before = log.read_bytes()
    long = " ".join(f"word{i}" for i in range(1500))
    refused = chat(small, "full", long)
    figure(f"a message of 1,500 words at -c {CTX}: {refused.stderr.strip().splitlines()[-1]}")
    assert refused.returncode == EXIT_CODES[ErrorCode.SESSION_FULL]
    assert "session_full: the message is " in refused.stderr
    assert f"holds {CTX:,} tokens" in refused.stderr
    assert log.read_bytes() == before  # not kept
    answered = chat(small, "full", "Are you still there?")
    assert answered.returncode == 0, answered.stderr
    figure(f"the next message: {answered.stdout.strip()[:70]!r}")


def test_turns_cross_epochs_with_every_request_new_tokens_only(
    small: DeviceStack,
) -> None:
    restarted = False
    seen: list[tuple[int, int]] = []  # (epoch, tokens its last completion saw) after each turn
    # Until the conversation is in its fourth epoch, with a restart in the middle of the third:
    # how many turns that takes is the model's (its answers' length), not the test's.
    for number, question in enumerate(itertools.islice(itertools.cycle(QUESTIONS), MAX_TURNS)):
        result = chat(small, "long", f"{question} ({number + 1})")
        assert result.returncode == 0, result.stderr
        logs = epochs(small, "long")
        current = own(logs[-1])
        usage = [r for r in current if r["type"] == "usage"][-1:]
        full = bool(usage) and sum(usage[0][k] for k in ("cache_n", "prompt_n", "predicted_n"))
        seen.append((len(logs) - 1, full))
        # In epoch 2, below `[context] epoch_at` (0.75), so no switch is due next turn: what
        # the model said decides how long epoch 2 lasts, and the first turn of it will do.
        if not restarted and len(logs) == 3 and usage and full < 0.75 * CTX:
            restarted = True
            small.restart_loopd()
            result = chat(small, "long", "And after a restart?")
            assert result.returncode == 0, result.stderr
            logs = epochs(small, "long")
            assert len(logs) == 3  # still epoch 2
            after = [r for r in own(logs[-1]) if r["type"] == "usage"][-1]
            figure(
                f"a loopd restart in epoch 2: the next request reused {after['cache_n']} tokens "
                f"of the {usage[0]['cache_n'] + usage[0]['prompt_n']} the last prompt had, and "
                f"processed {after['prompt_n']}"
            )
            assert after["cache_n"] >= usage[0]["cache_n"] + usage[0]["prompt_n"]
        if restarted and len(logs) >= 4:
            break
    assert restarted, f"the conversation never stood in epoch 2 below epoch_at: {seen}"
    logs = epochs(small, "long")
    assert len(logs) >= 4, f"only {len(logs)} epochs"
    instruction = trio.run(_tokens, small, SUMMARY_INSTRUCTION)
    lines, misses = [], []
    for number, records in enumerate(logs):
        assert "cache_loss" not in [r["type"] for r in records]
        usages = [r for r in own(records) if r["type"] == "usage"]
        ratios = []
        for before, after in itertools.pairwise(usages):
            new = new_tokens(before, after)
            ratios.append(after["prompt_n"] / new)
            # A token or two of the previous answer is evaluated again where its text
            # tokenizes differently from the tokens sampled (reference 5.4).
            assert after["prompt_n"] <= new + 2, (number, before, after)
        end = records[-1]
        if end["type"] == "epoch_end" and usages:
            # The summary asked for what the slot held (or less), then the instruction.
            asked = end["cache_n"] + end["prompt_n"]
            held = usages[-1]["cache_n"] + usages[-1]["prompt_n"] + usages[-1]["predicted_n"] - 1
            assert end["cache_n"] >= min(held, asked - instruction - 8), (number, end)
            ratios.append(end["prompt_n"] / max(asked - min(held, asked), instruction))
        if number and usages:
            first = usages[0]  # the one miss: only the system message was held
            misses.append(f"{first['cache_n']}+{first['prompt_n']}")
        mean = sum(ratios) / len(ratios) if ratios else float("nan")
        lines.append(f"epoch {number}: {len(usages)} requests of its own, "
                     f"tokens processed / new {mean:.2f}")  # fmt: skip
    figure(
        f"{len(seen)} turns at -c {CTX}: {len(logs)} epochs; first request of each new epoch "
        f"(cached+processed): {', '.join(misses)}; " + "; ".join(lines)
    )
    checked = subprocess.run(
        [str(BIN / "bxctl"), "verify", "--all", "long"],
        env=small.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout
    figure(f"bxctl verify --all long: {checked.stdout.strip()}")
    shown = subprocess.run(
        [str(BIN / "bxctl"), "show", "--stats", "--all", "long"],
        env=small.env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    figure(f"bxctl show --stats --all long:\n{shown.stdout}")
    folder = small.home / "sessions" / "long"
    opening = read_log(folder / f"{len(logs) - 1}.jsonl")[:3]  # its chain holds
    assert [type(r).__name__ for r in opening] == [
        "SessionStartRecord", "EpochStartRecord", "SummaryRecord"
    ]  # fmt: skip


async def _tokens(device: DeviceStack, text: str) -> int:
    async with Client(load_config(device.config)) as client:
        return await client.tokenize(text)
