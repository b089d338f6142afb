"""`make verify-device`, the fenced tool mode: SmolLM2-135M under its own chat template (which
renders no tools, so the server never returns a tool call) drives the tool path through tool
blocks in its text, under the profile `[model] profile = "auto"` chose from the real
server's `/props`.

Each `clock` or `echo` question is a try: a new session (the example exchanges right before
it, as in the issue's measurement; in one long session the small model copies its earlier
answers instead), then a second turn, so the cache is seen across a turn with tool calls.
What the model did is counted and reported, not asserted (a model's choice is not a test's
verdict): how many questions it answered with a tool block, how many blocks were well-formed
(JSON naming a tool the session has), how many of those loopd ran (a `tool_result` that is
the tool's own answer), and the failures it met (a bad block, an unknown tool). What is
asserted is the loop's: every turn ends done (a fenced turn cannot spiral into turn_limit),
every block has its result, a bad one is told to the model, nothing of the protocol reaches
the screen, and the cache holds.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from collections import Counter
from typing import Any

import pytest

from boxmaker.loopd.loop import NOT_RUN, loopd_words
from boxmaker.proto import Baseline, loads
from boxmaker.tools.fenced import parse_blocks

from ..helpers import real_sandbox
from ..processes import BIN
from .conftest import DeviceStack, figure

QUESTIONS = [
    ("clock", "What time is it?"),
    ("echo", "Echo the word banana."),
    ("clock", "What time is it now?"),
    ("echo", "Echo hello world."),
    ("clock", "What is the current time? Use the clock tool."),
    ("echo", "Echo the word cherry."),
    ("clock", "Call the clock tool."),
    ("echo", "Echo the text good morning."),
]
THEN = "Thank you."  # the second turn of each session


def test_auto_chose_the_small_model_s_fenced_profile(fenced_device: DeviceStack) -> None:
    said = fenced_device.loopd.err.text()
    line = next(x for x in said.splitlines() if "self-test ok   model profile:" in x)
    figure(f"fenced: {line.split('self-test ', 1)[1]}")
    assert "model profile: smollm2-135m, tools fenced (all); auto: the server serves " in line


def test_the_clock_and_echo_turns_make_real_tool_calls(fenced_device: DeviceStack) -> None:
    asked_with_block = 0
    blocks = 0
    well_formed: Counter[str] = Counter()
    ran: Counter[str] = Counter()
    problems: Counter[str] = Counter()
    reuse: list[float] = []
    lines = []
    for number, (tool, question) in enumerate(QUESTIONS, start=1):
        session = f"try{number}"
        shown = []
        for text in (question, THEN):
            result = fenced_device.bxctl("--session", session, "--new", "--say", text)
            assert result.returncode == 0, result.stderr
            assert "```tool" not in result.stdout  # a block's text is never shown as the answer
            shown.append(result.stdout.casefold())
        folder = fenced_device.home / "sessions" / session
        baseline = loads(Baseline, (folder / "0.baseline.json").read_bytes())
        assert baseline.fenced is not None
        for words in loopd_words(baseline):  # loopd's words to the model never reach the screen
            assert all(words.casefold() not in answer for answer in shown), (words, shown)
        offered = [schema.name for schema in baseline.tools]
        log = fenced_device.log(session)
        turn = split_turns(log)[0]
        made = []
        for record, results in completions(turn):
            assert not record.get("tool_calls")  # the server never returns a native call
            for call in parse_blocks(record["content"], offered):
                made.append(call.name if call.problem is None else f"({kind_of(call.problem)})")
                result = results.get(call.id)
                assert result is not None, f"no tool_result for {call.id} in {turn}"
                if call.problem is None:
                    well_formed[call.name] += 1
                    ran[call.name] += answered_by_the_tool(call.name, call.arguments, result)
                else:
                    problems[kind_of(call.problem)] += 1
                    # the model is told what was wrong, or (a second bad block ends tool use
                    # for the turn) that no more tools run in this turn
                    assert result["content"] in (call.problem, NOT_RUN), result
        blocks += len(made)
        asked_with_block += bool(made)
        first = next(r["content"] for r in turn if r["type"] == "assistant")
        lines.append(f"  {question!r} ({tool}): blocks {made or 'none'}; first {first[:70]!r}")
        assert "cache_loss" not in [r["type"] for r in log]
        reuse += cache_reuse(log)
    figure(
        f"fenced, {len(QUESTIONS)} questions (a new session each): {asked_with_block} answered "
        f"with a tool block; {blocks} blocks, well-formed {dict(well_formed)}; run by loopd "
        f"(the tool's own answer in the tool_result) {dict(ran)}; failures the model was told "
        f"of {dict(problems)}"
    )
    figure("\n".join(lines))
    figure(
        "fenced, cache within each session (the tool's result, then the second turn): tokens "
        f"processed / tokens new to the server per request {', '.join(f'{r:.2f}' for r in reuse)}"
        "; no cache_loss"
    )


def completions(
    turn: list[dict[str, Any]],
) -> list[tuple[dict[str, Any], dict[str, dict[str, Any]]]]:
    """Each assistant record of a turn with the results that answer it, by call id (a fenced
    answer's ids, `fenced-1`, ..., start again in every completion)."""
    found: list[tuple[dict[str, Any], dict[str, dict[str, Any]]]] = []
    for record in turn:
        if record["type"] == "assistant":
            found.append((record, {}))
        elif record["type"] == "tool_result" and found:
            found[-1][1][record["tool_call_id"]] = record
    return found


def split_turns(log: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    turns: list[list[dict[str, Any]]] = []
    for record in log:
        if record["type"] == "user" and (not turns or turns[-1][-1]["type"] == "turn_end"):
            turns.append([])
        if turns:
            turns[-1].append(record)
    return turns


def answered_by_the_tool(name: str, arguments: str, result: dict[str, Any]) -> bool:
    """Whether the result is the tool's own answer, not one loopd gave in its place (a repeat,
    arguments it could not use): the clock's time, or the echo of the text it was given."""
    content = result["content"]
    if name == "clock":
        return re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", content) is not None
    if name == "echo":
        return content == json.loads(arguments).get("text")
    return False


def kind_of(problem: str) -> str:
    return "unknown tool" if problem.startswith("(not run: no such tool") else "bad block"


def cache_reuse(log: list[dict[str, Any]]) -> list[float]:
    """Per request after the first: the tokens the server processed over those new to it
    (the previous prompt and its answer, less the last token, are held)."""
    usages = [r for r in log if r["type"] == "usage"]
    ratios = []
    for before, after in itertools.pairwise(usages):
        held = before["cache_n"] + before["prompt_n"] + before["predicted_n"] - 1
        new = after["cache_n"] + after["prompt_n"] - held
        assert after["cache_n"] >= before["cache_n"] + before["prompt_n"], (before, after)
        ratios.append(after["prompt_n"] / new if new > 0 else 1.0)
    return ratios


FILE_QUESTIONS = [
    "Read the file notes.md.",
    "Read the file notes.md and tell me when the meeting is.",
    "What does the file notes.md say?",
]
NOTES = "The meeting is at 3 pm in room 12.\n"


def test_the_small_model_reads_a_workspace_file_through_brokerd(
    fenced_device: DeviceStack,
) -> None:
    """SmolLM2 (fenced) is asked about a file of the workspace; brokerd answers its
    read_file blocks. Reported, not asserted: whether it wrote a read_file block, whether
    brokerd gave the file (numbered lines), and whether the answer says when the meeting
    is. Asserted: the turn ends done, every block has its result, the file's result is
    untrusted and of the workspace's class."""
    fenced_device.workspace.mkdir(parents=True, exist_ok=True)
    (fenced_device.workspace / "notes.md").write_text(NOTES)
    lines = []
    for number, question in enumerate(FILE_QUESTIONS, start=1):
        session = f"file{number}"
        result = fenced_device.bxctl("--session", session, "--new", "--say", question)
        assert result.returncode == 0, result.stderr
        log = fenced_device.log(session)
        baseline = loads(Baseline, (fenced_device.home / "sessions" / session /
                                    "0.baseline.json").read_bytes())  # fmt: skip
        offered = [schema.name for schema in baseline.tools]
        assert "read_file" in offered
        made, read = [], False
        for record, results in completions(log):
            for call in parse_blocks(record["content"], offered):
                assert call.id in results, f"no tool_result for {call.id}"
                made.append(call.name if call.problem is None else "(bad block)")
                answer = results[call.id]
                if call.name == "read_file" and answer["content"].startswith("     1\t"):
                    read = True
                    assert (answer["untrusted"], answer["class"]) == (True, "private")
        said = result.stdout.strip()
        lines.append(
            f"  {question!r}: blocks {made or 'none'}; brokerd gave the file: "
            f"{'yes' if read else 'no'}; the answer names 3 pm: "
            f"{'yes' if '3 pm' in said.casefold() or '3pm' in said.casefold() else 'no'}; "
            f"answer {said[:80]!r}"
        )
        assert log[-1]["type"] == "turn_end"
        assert log[-1]["outcome"] == "done"
    figure("fenced, a workspace file through brokerd:\n" + "\n".join(lines))


SANDBOX_QUESTIONS = [
    ("shell", "Run the shell command ls -la."),
    ("shell", "Use the shell tool to run: echo hello from the box"),
    ("run_cell", "Use run_cell to compute 6 * 7 in Python."),
    ("run_cell", "Run this Python code with run_cell: print(sum(range(10)))"),
]


def test_the_small_model_runs_a_command_and_a_cell_in_the_sandbox(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """SmolLM2 under the fenced profile (every tool of brokerd by name: its own profile offers
    only clock, echo and read_file, docs/models.md) with `shell` and `run_cell` core, asked to
    run a command and a cell. Reported, not asserted: which blocks it wrote and what ran.
    Asserted: each turn ends done, every block has its result, and what the sandbox ran is an
    untrusted result that says how it ended (a command) or is the cell's own output."""
    root = tmp_path_factory.mktemp("sandboxed")
    real_sandbox(root / "probe")  # skipped where there is none (failed, in CI)
    stack = DeviceStack(root, model='profile = "fenced"',
                        inference='[tools]\ncore = ["shell", "run_cell"]\n')  # fmt: skip
    lines = []
    try:
        for number, (tool, question) in enumerate(SANDBOX_QUESTIONS, start=1):
            session = f"box{number}"
            result = stack.bxctl("--session", session, "--new", "--say", question)
            assert result.returncode == 0, result.stderr
            log = stack.log(session)
            made, ran = [], []
            for record, results in completions(log):
                for call in parse_blocks(record["content"], ["clock", "echo", "shell", "run_cell"]):
                    assert call.id in results, f"no tool_result for {call.id}"
                    made.append(call.name if call.problem is None else "(bad block)")
                    answer = results[call.id]
                    if call.name in ("shell", "run_cell") and answer["untrusted"]:
                        if call.name == "shell":
                            assert "[exit " in answer["content"] or "[killed" in answer["content"]
                        ran.append(f"{call.name} {call.arguments} -> {answer['content'][:60]!r}")
            lines.append(f"  {question!r} (wants {tool}): blocks {made or 'none'}; ran "
                         f"{ran or 'nothing'}; answer {result.stdout.strip()[:60]!r}")  # fmt: skip
            assert log[-1]["type"] == "turn_end"
            assert log[-1]["outcome"] == "done"
    finally:
        stack.stop()
    figure("fenced, shell and run_cell in the sandbox:\n" + "\n".join(lines))


def test_the_fenced_logs_verify(fenced_device: DeviceStack) -> None:
    sessions = [f"try{number}" for number in range(1, len(QUESTIONS) + 1)]
    sessions += [f"file{number}" for number in range(1, len(FILE_QUESTIONS) + 1)]
    checked = subprocess.run(
        [str(BIN / "bxctl"), "verify", *sessions],
        env=fenced_device.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    figure(f"fenced: bxctl verify:\n{checked.stdout.rstrip()}")
    assert checked.returncode == 0, checked.stdout
