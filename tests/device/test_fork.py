"""Issue 46 on the real server: a fork's first request goes on from the bytes the slot still
holds. Two turns of a session, a fork after the first (`bxctl fork`), a turn of the fork:
llama-server reuses, from its cache, at least the whole of the source's first request, and the
fork replays identical (`bxctl replay`), as the source does."""

from __future__ import annotations

import subprocess

from ..processes import BIN
from .conftest import DeviceStack, figure


def test_a_forks_first_request_reuses_what_the_slot_holds(device: DeviceStack) -> None:
    for text in ("My name is Ada. Say hello to me.", "What is two plus two?"):
        said = device.bxctl("--session", "fork-source", "--new", "--say", text)
        assert said.returncode == 0, said.stderr
    made = subprocess.run(
        [BIN / "bxctl", "fork", "fork-source", "--at", "1", "--new", "forked"],
        env=device.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    said = device.bxctl("--session", "forked", "--say", "What is my name?")
    assert said.returncode == 0, said.stderr
    source = [r for r in device.log("fork-source") if r["type"] == "usage"]
    fork = [r for r in device.log("forked") if r["type"] == "usage"]
    first = source[0]["cache_n"] + source[0]["prompt_n"]  # the source's first request
    reused, total = fork[-1]["cache_n"], fork[-1]["cache_n"] + fork[-1]["prompt_n"]
    figure(
        f"fork: its first request reused {reused:,} of its {total:,} prompt tokens from the "
        f"slot (the source's first request was {first:,} tokens)"
    )
    assert reused >= first
    for session in ("fork-source", "forked"):
        replayed = subprocess.run(
            [BIN / "bxctl", "replay", session], env=device.env, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
