"""Undo and modes end to end (SPEC section 21): the fake llama-server asks for tools, loopd
carries the session's mode to a real brokerd, which checkpoints each call; `bxctl undo` and
the chat's `/undo`, `/rewind`, `/mode` and `/plan` go through loop.sock, loopd writes the
`mode` and `undo` records, and the next turn tells the model what was undone. Every session
replays identical when the stack stops (`Stack.replay`)."""

from __future__ import annotations

import json
from typing import Any

from boxmaker import proto as p

from ..helpers import read_log
from .test_broker import bxctl

WRITE = ("write_file", {"path": "todo.md", "content": "- tea\n"})


def records(stack: Any, session: str) -> list[p.LogRecord]:
    return read_log(stack.home / "sessions" / session / "0.jsonl")


def script(*turns: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Each turn's tool calls, one a completion, then its answer `Done N.`."""
    replies: list[dict[str, Any]] = []
    for number, tools in enumerate(turns, 1):
        replies += [{"tool_calls": [[name, json.dumps(args)]]} for name, args in tools]
        replies.append({"content": f"Done {number}."})
    return {"replies": replies, "default": {"content": "More?"}}


def test_bxctl_undo_previews_restores_and_the_next_turn_is_told(make_stack: Any) -> None:
    stack = make_stack(script([WRITE], [("write_file", {"path": "b.md", "content": "b"})], []))
    (stack.workspace / "keep.md").write_text("the owner's\n")
    assert stack.bxctl("--session", "u1", "--say", "Write my todo.").returncode == 0
    assert stack.bxctl("--session", "u1", "--say", "And b.").returncode == 0
    preview = bxctl(stack, "undo", "u1", "--turn", "1")  # no terminal to ask at: not undone
    assert preview.returncode == 0, preview.stderr
    assert "  write   todo.md" not in preview.stdout
    assert "  remove  todo.md" in preview.stdout
    assert "  remove  b.md" in preview.stdout
    assert "│ -- tea" in preview.stdout  # the text file's diff
    assert "not undone: say --yes" in preview.stdout
    assert (stack.workspace / "todo.md").exists()
    done = bxctl(stack, "undo", "u1", "--turn", "1", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "undone: 2 paths restored" in done.stdout
    assert sorted(path.name for path in stack.workspace.iterdir()) == ["keep.md"]
    undo = [r for r in records(stack, "u1") if isinstance(r, p.UndoRecord)]
    assert undo == [p.UndoRecord(undo[0].time, ("b.md", "todo.md"), 1, by="bxctl")]
    assert stack.bxctl("--session", "u1", "--say", "What now?").returncode == 0
    last = [r for r in records(stack, "u1") if isinstance(r, p.UserRecord)][-1]
    assert last.note == (
        "(The owner undid your changes from turn 1 on: b.md, todo.md are now as before it.)"
    )
    again = bxctl(stack, "undo", "u1", "--turn", "1", "--yes")
    assert "nothing to undo" in again.stdout


def test_the_owners_edit_stops_bxctl_undo_unless_forced(make_stack: Any) -> None:
    stack = make_stack(script([WRITE]))
    assert stack.bxctl("--session", "u2", "--say", "Write my todo.").returncode == 0
    (stack.workspace / "todo.md").write_text("- tea\n- the owner's milk\n")
    stopped = bxctl(stack, "undo", "u2", "--yes")  # the last turn's
    assert stopped.returncode == 1
    assert "todo.md: changed since by someone else" in stopped.stdout
    assert (stack.workspace / "todo.md").read_text() == "- tea\n- the owner's milk\n"
    forced = bxctl(stack, "undo", "u2", "--yes", "--force")
    assert forced.returncode == 0, forced.stdout
    assert not (stack.workspace / "todo.md").exists()


def test_modes_from_the_chat_and_a_plan_then_the_work(make_stack: Any) -> None:
    plan_turn = [WRITE]  # the model tries to write while it plans: denied, read-only
    stack = make_stack(script([WRITE], plan_turn, [WRITE]))
    chat = stack.bxctl("--session", "m1", "--mode", "read-only", "--say", "Write my todo.")
    assert chat.returncode == 0, chat.stderr
    denied = [r for r in records(stack, "m1") if isinstance(r, p.ToolResultRecord)]
    assert "this session is read-only" in denied[0].content
    assert not (stack.workspace / "todo.md").exists()
    modes = [r.mode for r in records(stack, "m1") if isinstance(r, p.ModeRecord)]
    assert modes == [p.Mode.READ_ONLY]  # set once its first turn made the session
    typed = "/mode\n/mode auto\n/plan a todo for the week\ny\n"
    piped = stack.bxctl("--session", "m1", stdin=typed)
    assert piped.returncode == 0, piped.stdout + piped.stderr
    said = piped.stdout + piped.stderr
    assert "[the session's mode is read-only]" in said  # `/mode` alone: which it is
    assert "[the session's mode is auto (was read-only)]" in said
    log = records(stack, "m1")
    assert [r.mode for r in log if isinstance(r, p.ModeRecord)] == [p.Mode.READ_ONLY, p.Mode.AUTO]
    users = [r for r in log if isinstance(r, p.UserRecord)]
    assert users[1].content.startswith("Make a plan for this")
    assert users[1].settings is not None
    assert users[1].settings.mode is p.Mode.READ_ONLY  # the plan's own turn
    assert users[2].content == "Carry out the plan now."
    assert users[2].settings is not None
    assert users[2].settings.mode is None  # the work: the session's mode (auto)
    results = [r for r in log if isinstance(r, p.ToolResultRecord)]
    assert "this session is read-only" in results[1].content
    assert results[2].content.startswith("Wrote 6 bytes to todo.md")
    assert (stack.workspace / "todo.md").read_text() == "- tea\n"


def test_bxctl_tools_says_whether_each_root_is_checkpointed(make_stack: Any) -> None:
    stack = make_stack(script())
    stack.brokerd.err.wait_for("self-test ok")
    listed = bxctl(stack, "tools")
    assert listed.returncode == 0, listed.stderr
    header = next(line for line in listed.stdout.splitlines() if line.startswith("ROOT"))
    assert header.split()[-1] == "CHECKPOINTS"
    row = next(line for line in listed.stdout.splitlines() if line.startswith("workspace"))
    assert row.split()[-1] in ("kept", "yet")  # "not looked at yet" until its first snapshot
