"""SmolLM2 (fenced) keeps a note with `remember` in one session and is asked about it in
another, where auto-recall runs before the first request and `recall` is offered (issue 31);
the session's tools are `clock`, `echo`, `remember` and `recall` (`[tools] core` names the
last two). Reported, not asserted: which blocks it wrote, whether a note was kept, what
auto-recall appended, what it answered. Asserted: each turn ends done, every block has its
result, the tools are those four, and an auto-recall ran in the second session (a note is
kept for it by the owner when the model kept none)."""

from __future__ import annotations

import subprocess

import pytest
from bxdev.processes import WAIT_S

from boxmaker.memory import NotesFile
from boxmaker.proto import Baseline, NoteRecord, loads
from boxmaker.tools.fenced import parse_blocks

from ..processes import BIN
from .conftest import DeviceStack, figure
from .test_fenced import completions, kind_of

REMEMBER = "Use the remember tool to keep this note: my boat is named Heron."
RECALL = "What is the name of my boat? Use the recall tool."
CORE = '[tools]\ncore = ["remember", "recall"]\n'


def blocks(stack: DeviceStack, session: str) -> list[str]:
    """The tool blocks the model wrote in `session`, each with its result's first words."""
    log = stack.log(session)
    baseline = (stack.home / "sessions" / session / "0.baseline.json").read_bytes()
    offered = [tool.name for tool in loads(Baseline, baseline).tools]
    assert offered == ["clock", "echo", "remember", "recall"]
    made = []
    for record, results in completions(log):
        for call in parse_blocks(record["content"], offered):
            assert call.id in results, f"no tool_result for {call.id}"
            said = results[call.id]["content"].replace("\n", " ")[:60]
            made.append(f"{call.name} {call.arguments} -> {said!r}" if call.problem is None
                        else f"({kind_of(call.problem)}: {call.name})")  # fmt: skip
    assert log[-1]["type"] == "turn_end"
    assert log[-1]["outcome"] == "done"
    return made


def test_the_small_model_remembers_in_one_session_and_recalls_in_another(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("memory")
    stack = DeviceStack(root, model='profile = "fenced"', inference=CORE)
    lines = []
    try:
        first = stack.bxctl("--session", "keep", "--new", "--say", REMEMBER)
        assert first.returncode == 0, first.stderr
        lines.append(f"  {REMEMBER!r}: blocks {blocks(stack, 'keep') or 'none'}; answer "
                     f"{first.stdout.strip()[:60]!r}")  # fmt: skip
        notes = [r for r in NotesFile(stack.home).read().records if isinstance(r, NoteRecord)]
        lines.append(f"  notes kept by the model: {[n.text for n in notes] or 'none'}")
        if not any("heron" in n.text.casefold() for n in notes):
            subprocess.run([str(BIN / "bxctl"), "memory", "add", "My boat is named Heron."],
                           env=stack.env, check=True, timeout=WAIT_S)  # fmt: skip
            lines.append("  (so the owner kept it with bxctl memory add)")
        second = stack.bxctl("--session", "ask", "--new", "--say", RECALL)
        assert second.returncode == 0, second.stderr
        log = stack.log("ask")
        recalled = [r for r in log if r["type"] == "recall"]
        assert recalled, "no auto-recall in the second session"
        lines.append(f"  auto-recall of {recalled[0]['query']!r}: "
                     f"{recalled[0]['content'].splitlines()[1:]}")  # fmt: skip
        lines.append(f"  {RECALL!r}: blocks {blocks(stack, 'ask') or 'none'}; answer "
                     f"{second.stdout.strip()[:80]!r}; names Heron: "
                     f"{'heron' in second.stdout.casefold()}")  # fmt: skip
    finally:
        stack.stop()
    figure("fenced, remember in one session and recall in another:\n" + "\n".join(lines))
