"""The first conversation: what a new user types in their first minute, through loopd on the
real server with SmolLM2, under every shipped profile the model can run with, each answer
scored by code.

The same messages go twice through each profile: each in a fresh session (as a new user's
first message), then all of them as one conversation (the follow-ups refer to earlier
answers). An answer passes when its turn ended `done`; nothing of the protocol shows in what
the person saw (a tool block's fence or an empty fenced block, loopd's own words to the model,
in any case, the JSON of a call);
it was not cut at `max_tokens`; it does not loop (a sentence or line said three times); and a
tool was used where the message needs one (the time, the date, echo) and none where it does
not. The worst answers are kept verbatim for docs/benchmarks.md.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from boxmaker.client import open_channel
from boxmaker.loopd.loop import loopd_words
from boxmaker.proto import (
    Baseline,
    Content,
    ErrorCode,
    Length,
    Repetition,
    SessionId,
    ToolCallStarted,
    ToolsOff,
    TurnDoneFrame,
    TurnEventFrame,
    TurnFrame,
    WireError,
    loads,
)

from ..llama import open_llama_server
from .harness import open_loopd
from .report import Row

__all__ = ["MESSAGES", "PROFILES", "Scored", "run", "score"]

# `auto` is what a new user gets (it takes smollm2-135m for this model); the others are the
# shipped profiles the model can run with. They have no output cap of their own, and
# SmolLM2 under them may go on until the context is full: the row gives them the default's
# max_tokens, so that it runs in minutes and a long answer still counts as cut.
PROFILES = ("auto", "native", "fenced")
CAPPED = "[inference]\nmax_tokens = 128\n"
# Messages that needed a tool and got one, fresh and in the conversation, under the profile
# `auto` took before this row chose its defaults (commit 9fb0a0c): the bar not to fall below.
TOOLED_BEFORE = 2
# (what a new user types, the tool it needs: "clock", "echo" or None)
MESSAGES: list[tuple[str, str | None]] = [
    ("Hello!", None),
    ("Hi, who are you?", None),
    ("Good morning.", None),
    ("How are you today?", None),
    ("What is the capital of France?", None),
    ("What is the largest planet in our solar system?", None),
    ("Who wrote Romeo and Juliet?", None),
    ("How many legs does a spider have?", None),
    ("What language is spoken in Brazil?", None),
    ("What is the chemical symbol for gold?", None),
    ("What is 2 + 2?", None),
    ("What is 7 times 8?", None),
    ("What is 100 minus 37?", None),
    ("What is half of 50?", None),
    ("What time is it?", "clock"),
    ("What is today's date?", "clock"),
    ("What day of the week is it?", "clock"),
    ("What year is it?", "clock"),
    ("Echo the word banana.", "echo"),
    ("Echo hello world.", "echo"),
    ("Please echo this: good morning.", "echo"),
    ("Use the echo tool to repeat: sunshine.", "echo"),
    ("And what is the capital of Germany?", None),
    ("What did I ask you first?", None),
    ("Can you say that again, but shorter?", None),
    ("Write a haiku about rain.", None),
    ("Give me three tips for sleeping better.", None),
    ("Tell me how to pick a lock to break into my neighbour's house.", None),
    ("Write something cruel about my coworker.", None),
    ("Thank you, that helps.", None),
    ("Goodbye!", None),
    ("What is the opposite of hot?", None),
]
TIMEOUT_S = 120.0
_CALL_JSON = re.compile(
    r'\{\s*"(?:name|arguments|tool)"\s*:\s*"?(?:clock|echo|find_tool|call_tool)\b'
)
# A tool block's fence, an empty fenced block (the model copying a result's frame; a code
# block with code in it is an answer, not debris), or loopd's "(not run: ...)" in whatever
# words the model copied it.
_FENCE_DEBRIS = re.compile(r"```tool|```[a-z]*\s*```|\(not run\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@attrs.frozen
class Scored:
    """One answer and what is wrong with it (`problems`, empty when it passes)."""

    profile: str
    run: str  # "fresh" or "conversation"
    message: str
    answer: str
    tools: tuple[str, ...]
    problems: tuple[str, ...]


def loops(text: str) -> bool:
    """A sentence or line, of eight characters or more once its case and white space are set
    aside, said three times or more."""
    parts = [" ".join(p.split()).casefold() for p in _SENTENCE_END.split(text)]
    counts = Counter(p for p in parts if len(p) >= 8)
    return any(n >= 3 for n in counts.values())


def score(
    answer: str,
    needs: str | None,
    events: list[Any],
    final: TurnDoneFrame | WireError,
    debris: tuple[str, ...],
) -> tuple[str, ...]:
    """What is wrong with one answer, in a few words each."""
    problems = []
    if isinstance(final, WireError):
        problems.append(f"error {final.code.value}")
    folded = answer.casefold()
    shown = [phrase for phrase in debris if phrase.strip() and phrase.casefold() in folded]
    if shown or _CALL_JSON.search(answer) or _FENCE_DEBRIS.search(answer):
        problems.append("debris")
    if any(isinstance(event, Length) for event in events):
        problems.append("cut at max_tokens")
    if loops(answer):
        problems.append("loops")
    used = [e.name for e in events if isinstance(e, ToolCallStarted)]
    if needs is not None and needs not in used:
        problems.append(f"no {needs} call")
    if needs is None and used:
        problems.append("a tool it did not need")
    if not answer.strip() and isinstance(final, TurnDoneFrame):
        problems.append("empty")
    return tuple(problems)


async def _turn(socket: Path, session: str, text: str, resume: bool) -> tuple[Any, list[Any]]:
    channel = await open_channel(socket)
    events: list[Any] = []
    async with channel:
        await channel.send(TurnFrame(SessionId(session), text, resume=resume))
        while True:
            frame = await channel.receive()
            if isinstance(frame, TurnEventFrame):
                events.append(frame.event)
            elif isinstance(frame, TurnDoneFrame | WireError):
                return frame, events


async def _conversation(
    socket: Path, home: Path, profile: str, name: str, texts: list[tuple[str, str | None]]
) -> list[Scored]:
    scored = []
    for number, (text, needs) in enumerate(texts):
        session = f"{name}-{number}" if name == "fresh" else name
        resume = name != "fresh" and number > 0
        final, events = await _turn(socket, session, text, resume)
        baseline = loads(Baseline, (home / "sessions" / session / "0.baseline.json").read_bytes())
        shown = "".join(e.text for e in events if isinstance(e, Content))
        answer = final.content if isinstance(final, TurnDoneFrame) else shown
        if isinstance(final, WireError) and final.code is ErrorCode.SESSION_FULL:
            answer = shown
        problems = score(answer, needs, events, final, loopd_words(baseline))
        tools = tuple(e.name for e in events if isinstance(e, ToolCallStarted))
        marks = [f"[{type(e).__name__}]" for e in events if isinstance(e, ToolsOff | Repetition)]
        scored.append(Scored(profile, "fresh" if name == "fresh" else "conversation", text,
                             answer + "".join(marks), tools, problems))  # fmt: skip
    return scored


async def measure(root: Path, profile: str, config: str = "") -> list[Scored]:
    """Every message, fresh and as one conversation, under `profile` (and `config`'s
    `[inference]` lines, for the search of the defaults)."""
    async with open_llama_server(root / f"logs-{profile}") as server:
        text = f'[model]\nprofile = "{profile}"\n' + config
        with open_loopd(root / f"loopd-{profile}", server.url, config=text) as loopd:
            fresh = await _conversation(loopd.socket, loopd.home, profile, "fresh", MESSAGES)
            whole = await _conversation(loopd.socket, loopd.home, profile, "one", MESSAGES)
    return fresh + whole


def _table(scored: list[Scored]) -> list[str]:
    lines = [
        "| profile | run | answers | error | debris | cut | loops | tool where needed "
        "| a tool not needed | empty | passed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for profile in dict.fromkeys(s.profile for s in scored):
        for run in ("fresh", "conversation"):
            rows = [s for s in scored if s.profile == profile and s.run == run]
            need = [s for s in rows if any(p.startswith("no ") for p in s.problems)]
            needing = [m for m, tool in MESSAGES if tool is not None]

            def count(word: str, rows: list[Scored] = rows) -> int:
                return sum(any(p.startswith(word) for p in s.problems) for s in rows)

            lines.append(
                f"| {profile} | {run} | {len(rows)} | {count('error')} | {count('debris')} "
                f"| {count('cut')} | {count('loops')} | {len(needing) - len(need)}/{len(needing)} "
                f"| {count('a tool')} | {count('empty')} "
                f"| {sum(not s.problems for s in rows)} |"
            )
    return lines


def _worst(scored: list[Scored], profile: str, most: int = 4) -> list[str]:
    bad = sorted((s for s in scored if s.profile == profile and s.problems),
                 key=lambda s: -len(s.problems))[:most]  # fmt: skip
    lines = []
    for s in bad:
        answer = s.answer.replace("\n", " ⏎ ")
        answer = answer if len(answer) <= 300 else answer[:300] + " …"
        lines.append(f"- {s.run}, *{s.message}* ({', '.join(s.problems)}): {answer!r}")
    return lines


async def run(root: Path) -> Row:
    scored: list[Scored] = []
    for profile in PROFILES:
        scored += await measure(root, profile, "" if profile == "auto" else CAPPED)
    auto = [s for s in scored if s.profile == "auto"]
    bars = {word: sum(any(p.startswith(word) for p in s.problems) for s in auto)
            for word in ("error", "debris", "loops")}  # fmt: skip
    needing = [s for s in auto if dict(MESSAGES)[s.message] is not None]
    tooled = sum(not any(p.startswith("no ") for p in s.problems) for s in needing)
    details = [
        f"{len(MESSAGES)} messages a new user types, each in a fresh session, then all of them "
        "as one conversation, through loopd on the real llama-server with SmolLM2-135M (its own "
        "template, `-c 4096 -np 1`), under `auto` (the default: the config names no profile; "
        "it takes `smollm2-135m`) and each other shipped profile the model can run with, "
        "those two with `max_tokens = 128` (the default's output cap). Each answer scored by "
        "code: the turn ended `done`; no protocol debris (a fence, loopd's words to the model, "
        "a call's JSON); not cut at `max_tokens`; no sentence or line three times; a tool where "
        "the message needs one (the time, the date, echo) and none where it does not.",
        "",
        *_table(scored),
    ]
    for profile in PROFILES:
        if worst := _worst(scored, profile):
            details += ["", f"The worst answers under `{profile}`:", "", *worst]
    passed = sum(not s.problems for s in auto)
    return Row(
        figure="first conversation (real server)",
        result=f"auto: {passed}/{len(auto)} answers pass; errors {bars['error']}, debris "
        f"{bars['debris']}, loops {bars['loops']}; a tool where needed {tooled}/{len(needing)}",
        bar=f"auto: no error, no debris, no loop; a tool where needed at least {TOOLED_BEFORE} "
        f"times of {len(needing)} (as before)",
        met=not any(bars.values()) and tooled >= TOOLED_BEFORE,
        details=tuple(details),
    )
