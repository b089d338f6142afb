"""Row 6, cache reuse on the real server: a ten-turn conversation with SmolLM2 through loopd,
and the same ten questions from a client that puts the current time in its system prompt, as
many agent frameworks do.

For each request after the first: the prompt tokens the server processed, against the tokens
that request added. The server holds the previous prompt and what it generated (less the last
token, sampled but never evaluated), so the tokens new to it are the prompt's total less those.
A ratio of 1.00 is a cache that held everything; the client with the clock in its prompt
changes the system prompt on every request, so the server processes the whole conversation
again each time. Both run with temperature 0 and `max_tokens` 48 on the same server and slot.
"""

from __future__ import annotations

import itertools
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from ..llama import open_llama_server
from .harness import (
    NATIVE,
    SYSTEM,
    BenchError,
    open_loopd,
    session_log,
    timed_turn,
    turn_frame,
)
from .report import Row

__all__ = ["QUESTIONS", "run"]

QUESTIONS = [
    "Hello!", "Name a colour.", "Name a fruit.", "Count to three.", "Say yes.",
    "Name a city.", "Name a river.", "Say goodbye.", "Name an animal.", "Thank you.",
]  # fmt: skip
SETTINGS = {"temperature": 0.0, "max_tokens": 48}

Figure = tuple[int, int]  # tokens processed, tokens new to the server


async def run(root: Path) -> Row:
    async with open_llama_server(root / "logs") as server:
        config = "[inference]\ntemperature = 0.0\nmax_tokens = 48\n" + NATIVE
        with open_loopd(root / "loopd", server.url, config=config) as loopd:
            for number, question in enumerate(QUESTIONS):
                await timed_turn(loopd.socket, turn_frame("ten", question, resume=number > 0))
            usages = [r for r in session_log(loopd.home, "ten") if r["type"] == "usage"]
            losses = sum(r["type"] == "cache_loss" for r in session_log(loopd.home, "ten"))
        through_loopd = _figures(usages)
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
            with_clock = _figures(await _clock_in_prompt(http))
    loop_ratio = statistics.fmean(p / n for p, n in through_loopd)
    clock_ratio = statistics.fmean(p / n for p, n in with_clock)
    details = [
        "The same ten questions from each client, one conversation each, on the real "
        "llama-server with SmolLM2-135M (its own chat template, `-c 4096 -np 1`). Per request "
        "after the first: prompt tokens processed / tokens new to the server.",
        "",
        "| request | through loopd | clock in the system prompt |",
        "|---|---|---|",
    ]
    for number, (ours, theirs) in enumerate(zip(through_loopd, with_clock, strict=True), 2):
        details.append(f"| {number} | {_cell(ours)} | {_cell(theirs)} |")
    details += [
        f"| mean | **{loop_ratio:.2f}** | **{clock_ratio:.2f}** |",
        "",
        f"`cache_loss` records in loopd's log: {losses}. Prompt tokens processed in all: "
        f"{sum(p for p, _ in through_loopd):,} through loopd, "
        f"{sum(p for p, _ in with_clock):,} with the clock in the prompt.",
    ]
    worst = max(p - n for p, n in through_loopd)
    return Row(
        figure="cache reuse (real server)",
        result=f"mean ratio {loop_ratio:.2f} through loopd ({clock_ratio:.2f} with the clock in "
        f"the system prompt); {losses} cache_loss",
        bar="every request after the first processes only its new tokens (ratio 1.0); "
        "no `cache_loss`",
        # A token or two of the previous answer may be evaluated again where its text
        # tokenizes differently from the tokens sampled (reference 5.4, "token boundaries").
        met=losses == 0 and worst <= 2,
        details=tuple(details),
    )


def _cell(figure: Figure) -> str:
    processed, new = figure
    return f"{processed}/{new} = {processed / new:.2f}"


def _figures(usages: list[dict[str, Any]]) -> list[Figure]:
    figures = []
    for before, after in itertools.pairwise(usages):
        held = before["cache_n"] + before["prompt_n"] + before["predicted_n"] - 1
        new = after["cache_n"] + after["prompt_n"] - held
        if new <= 0:
            raise BenchError(f"a request added no tokens: {before} then {after}")
        figures.append((after["prompt_n"], new))
    return figures


async def _clock_in_prompt(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The ten questions from a client whose system prompt ends with the current time."""
    history: list[dict[str, Any]] = []
    timings = []
    for question in QUESTIONS:
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        system = {"role": "system", "content": f"{SYSTEM.rstrip()}\n\nThe current time is {now}."}
        history.append({"role": "user", "content": question})
        body = {"messages": [system, *history], "cache_prompt": True, "id_slot": 0, **SETTINGS}
        response = await http.post("/v1/chat/completions", json=body)
        if response.status_code != 200:
            raise BenchError(f"the server answered {response.status_code}: {response.text}")
        answer = response.json()
        history.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
        timings.append(answer["timings"])
    return timings
