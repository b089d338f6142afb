"""End to end through a real brokerd: the fake llama-server asks for file tools, loopd sends
them to brokerd over broker.sock, the policy decides, and the owner answers at a terminal,
with `--yes`, or from another terminal (`bxctl approvals`)."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from bxdev.processes import WAIT_S, Process

from boxmaker import proto as p
from boxmaker.brokerd import SHIPPED_POLICY

from ..helpers import read_log, real_sandbox
from ..processes import BIN, Stack, Terminal
from ..replay.test_fixtures import FIXTURES

# The shipped policy with writes asked for (its example of an allowed write now says ask).
ASK_WRITES = SHIPPED_POLICY.replace(
    '[grants.write_file]\ndecision = "allow"', '[grants.write_file]\ndecision = "ask"'
).replace(
    'arguments = { path = "notes/todo.md", content = "- buy milk\\n" }\ndecision = "allow"',
    'arguments = { path = "notes/todo.md", content = "- buy milk\\n" }\ndecision = "ask"',
)
assert ASK_WRITES.count('decision = "ask"') == SHIPPED_POLICY.count('decision = "ask"') + 2


def calls(*tools: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A script: each tool call in its own completion, then an answer."""
    replies: list[dict[str, Any]] = [
        {"tool_calls": [[name, json.dumps(arguments)]]} for name, arguments in tools
    ]
    return {"replies": [*replies, {"content": "Done."}], "default": {"content": "More?"}}


def results(stack: Stack, session: str) -> list[p.ToolResultRecord]:
    records = read_log(stack.home / "sessions" / session / "0.jsonl")
    return [r for r in records if isinstance(r, p.ToolResultRecord)]


def bxctl(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "bxctl"), *args], env=stack.env, capture_output=True,
                          text=True, timeout=WAIT_S, check=False)  # fmt: skip


def test_a_workspace_file_is_read_through_brokerd_and_a_long_one_kept_whole(
    make_stack: Any,
) -> None:
    script = calls(
        ("read_file", {"path": "notes/todo.md"}),
        ("read_file", {"path": "build.log"}),
        ("read_result", {"call": 2, "offset": 0, "limit": 40}),
    )
    stack = make_stack(script, config="[loop]\ntool_result_cap = 2000\n")
    (stack.workspace / "notes").mkdir(parents=True)
    (stack.workspace / "notes" / "todo.md").write_text("buy tea\ncall Ana\n")
    log = "".join(f"step {n}: ok\n" for n in range(1, 400)) + "FAILED: the tail says why\n"
    (stack.workspace / "build.log").write_text(log)
    said = stack.bxctl("--session", "r1", "--say", "Read my notes and the build log.")
    assert (said.returncode, said.stdout) == (0, "Done.\n"), said.stderr
    todo, build, part = results(stack, "r1")
    assert todo.content == "     1\tbuy tea\n     2\tcall Ana"
    assert (todo.untrusted, todo.data_class) == (True, p.DataClass.PRIVATE)
    assert build.truncated
    assert build.whole is not None
    assert "FAILED: the tail says why" in build.content  # the tail survives the cap
    kept = (stack.home / "sessions" / "r1" / "results" / "2.txt").read_text()
    assert kept.endswith("   400\tFAILED: the tail says why")
    assert part.content == (
        f"Characters 0 to 40 of {len(kept):,} of call 2's result; the rest from offset 40:\n"
        + kept[:40]
    )
    assert (part.untrusted, part.data_class) == (True, p.DataClass.PRIVATE)  # as the file was
    assert bxctl(stack, "verify", "r1").returncode == 0


def test_paths_outside_the_workspace_are_denied(make_stack: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("the owner's secret\n")
    script = calls(
        ("read_file", {"path": str(outside)}),
        ("read_file", {"path": "../outside.txt"}),
        ("write_file", {"path": "/etc/boxmaker-test", "content": "x"}),
        ("list_dir", {"path": "link"}),
    )
    stack = make_stack(script)
    stack.workspace.mkdir(parents=True, exist_ok=True)
    (stack.workspace / "link").symlink_to(tmp_path)
    said = stack.bxctl("--session", "d1", "--say", "Look around.")
    assert said.returncode == 0, said.stderr
    texts = [r.content for r in results(stack, "d1")]
    assert all(text.startswith("The call was denied: ") for text in texts), texts
    assert "is outside the workspace" in texts[0]
    assert "holds '..'" in texts[1]
    assert "secret" not in "".join(texts)
    assert not Path("/etc/boxmaker-test").exists()


def test_an_ask_is_approved_once_with_yes_and_denied_without_a_way_to_ask(
    make_stack: Any,
) -> None:
    write = {"tool_calls": [["write_file", json.dumps({"path": "todo.md", "content": "tea\n"})]]}
    script = {"replies": [write, {"content": "Not allowed."}, write, {"content": "Done."}]}
    stack = make_stack(script, policy=ASK_WRITES)
    piped = stack.bxctl("--session", "a1", "--say", "Write it.")
    assert piped.returncode == 0, piped.stderr
    assert not (stack.workspace / "todo.md").exists()
    [denied] = results(stack, "a1")
    assert "nobody could be asked" in denied.content
    assert piped.stdout == "Not allowed.\n"
    yes = stack.bxctl("--session", "a1", "--yes", "--json", "--say", "Write it now.")
    assert yes.returncode == 0, yes.stderr
    assert (stack.workspace / "todo.md").read_text() == "tea\n"
    events = [json.loads(line)["body"].get("event", {}) for line in yes.stdout.splitlines()]
    needed = [e for e in events if e.get("type") == "approval_needed"]
    assert [(e["tool"], e["summary"]) for e in needed] == [("write_file", "write_file todo.md")]
    records = read_log(stack.home / "sessions" / "a1" / "0.jsonl")
    approvals = [(r.answer, r.by) for r in records if isinstance(r, p.ApprovalRecord)]
    assert approvals == [
        (p.Answer.DENY, p.ApprovedBy.NOBODY),
        (p.Answer.ONCE, p.ApprovedBy.CHANNEL),
    ]


def test_the_owner_answers_at_the_terminal_or_from_another_one(make_stack: Any) -> None:
    write = ("write_file", {"path": "todo.md", "content": "tea\n"})
    edit = ("edit_file", {"path": "todo.md", "old": "tea", "new": "coffee"})
    policy = ASK_WRITES.replace(
        '[grants.edit_file]\ndecision = "allow"', '[grants.edit_file]\ndecision = "ask"'
    )
    stack = make_stack(calls(write, edit), policy=policy)
    term = Terminal([str(BIN / "bxctl"), "chat", "--session", "t1"], stack.env)
    try:
        at = term.wait_for_prompt()
        term.type("Write my todo list.\r")
        shown = term.wait_for("│ content: tea", start=at)  # every argument, before the question
        asked = term.wait_for("Allow write_file todo.md? [y]es once, [s]ession", start=shown)
        term.type("y")
        asked = term.wait_for("Allow edit_file todo.md?", start=asked)
        listed = bxctl(stack, "approvals")
        assert listed.returncode == 0, listed.stderr
        assert "  │ path: todo.md\n  │ old: tea\n  │ new: coffee\n" in listed.stdout
        [row] = [line for line in listed.stdout.splitlines() if "edit_file todo.md" in line]
        answered = bxctl(stack, "approvals", row.split()[0], "session")
        assert answered.returncode == 0, answered.stderr
        term.wait_for("(answered elsewhere)", start=asked)
        term.wait_for_prompt(term.wait_for("Done.", start=asked))
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
    assert (stack.workspace / "todo.md").read_text() == "coffee\n"
    assert bxctl(stack, "approvals").stderr == "no call waits for an answer\n"


def test_bxctl_tools_lists_the_tools_their_grants_and_the_roots(make_stack: Any) -> None:
    stack = make_stack(calls())
    shown = bxctl(stack, "tools")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    read = next(line for line in lines if line.startswith("read_file"))
    assert read.split()[:3] == ["read_file", "core", "allow"]
    assert "policy.toml [grants.read_file]" in read
    assert next(line for line in lines if line.startswith("echo")).split()[:2] == ["echo", "found"]
    root = next(line for line in lines if line.startswith("workspace"))
    cells = ["workspace", str(stack.workspace), "yes", "yes", "private"]
    assert root.split()[:5] == cells
    assert root.split()[5:] in (
        ["kept"],
        ["not", "looked", "at", "yet"],
    )  # brokerd's first snapshot
    listing = json.loads(bxctl(stack, "tools", "--json").stdout)
    assert {t["schema"]["name"] for t in listing["tools"]} >= {"clock", "read_file", "echo"}


def test_brokerd_down_is_a_tool_result_and_loopd_reconnects_by_itself(make_stack: Any) -> None:
    clock = {"tool_calls": [["clock", "{}"]]}
    stack = make_stack({"replies": [clock, {"content": "No clock."}, clock, {"content": "Ok."}]})
    stack.brokerd.stop()
    down = stack.bxctl("--session", "b1", "--say", "Time?")
    assert down.returncode == 0, down.stderr  # a tool failure is data, never a failed turn
    [result] = results(stack, "b1")
    assert "brokerd is not running" in result.content
    assert "was not sent" in result.content
    stack.brokerd = stack.start_brokerd()
    stack.brokerd.err.wait_for("listening on")
    again = stack.bxctl("--session", "b1", "--say", "Time now?")
    assert again.returncode == 0, again.stderr
    assert results(stack, "b1")[-1].content.startswith("20")  # an RFC 3339 time
    assert "brokerd is not running" not in bxctl(stack, "tools").stderr


def brokerd_serve(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "brokerd"), "serve", "--config", str(config)], env=env,
                          capture_output=True, text=True, timeout=WAIT_S, check=False)  # fmt: skip


def test_brokerd_refuses_to_start_saying_why(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "BOXMAKER_HOME": str(home)}
    config = tmp_path / "config.toml"
    config.write_text('[tools]\ncore = ["bash"]\n')  # not a tool brokerd holds
    refused = brokerd_serve(config, env)
    assert refused.returncode == 1
    assert "self-test FAIL config:" in refused.stderr
    assert "'bash' is not a tool that can be core" in refused.stderr
    assert not home.exists()  # nothing touched before the config is known good
    config.write_text('[tool]\nworkspace = "w"\n')  # a section of neither daemon
    assert "unknown field @ $.tool; did you mean 'tools'?" in brokerd_serve(config, env).stderr
    config.write_text("")
    (tmp_path / "policy.toml").write_text(f'[roots.everything]\npath = "{tmp_path}"\n')
    refused = brokerd_serve(config, env)
    assert refused.returncode == 1
    said = f"root everything ({tmp_path}) holds {home}: an agent that can edit its own grants"
    assert said in refused.stderr
    assert "brokerd is not starting" in refused.stderr
    assert not (home / "run" / "broker" / "broker.sock").exists()


def test_one_brokerd_per_home_and_a_stop_signal_ends_it(make_stack: Any) -> None:
    stack = make_stack(calls())
    second = brokerd_serve(stack.config, stack.env)
    assert second.returncode == 1
    assert f"another brokerd (pid {stack.brokerd.popen.pid}) is already serving" in second.stderr
    socket = stack.home / "run" / "broker" / "broker.sock"
    assert oct(socket.stat().st_mode & 0o777) == "0o600"
    assert oct(socket.parent.stat().st_mode & 0o777) == "0o700"
    stack.brokerd.popen.send_signal(signal.SIGTERM)
    assert stack.brokerd.popen.wait(WAIT_S) == 0
    stack.brokerd.err.wait_for("stopped")
    assert not socket.exists()  # its own socket file, removed on the way out


def test_shell_and_run_cell_run_in_the_sandbox_through_brokerd(
    make_stack: Any, tmp_path: Path
) -> None:
    real_sandbox(tmp_path / "probe")  # skipped (or failed, in CI) where there is none
    script = calls(
        ("shell", {"command": "echo from the box > made.txt; ls; id -u; cat ~/.ssh/id_rsa"}),
        ("run_cell", {"code": "total = sum(range(10))"}),
        ("run_cell", {"code": "print(open('made.txt').read().strip()); total"}),
    )
    stack = make_stack(script)
    said = stack.brokerd.err.wait_for("self-test ok   sandbox: ")
    assert "bubblewrap" in said
    assert "shell and run_cell run in it" in said
    reply = stack.bxctl("--session", "x1", "--say", "Make a file, then add up.")
    assert (reply.returncode, reply.stdout) == (0, "Done.\n"), reply.stderr
    shell, first, second = results(stack, "x1")
    assert shell.content.startswith("made.txt\n1000\n"), shell.content
    assert "No such file" in shell.content  # the owner's home is not there
    assert "[exit 1 · " in shell.content
    assert (stack.workspace / "made.txt").read_text() == "from the box\n"
    assert first.content.startswith("(A new Python interpreter")
    assert second.content == "[1] from the box\nLast value: 45"
    assert all((r.untrusted, r.data_class) == (True, p.DataClass.PRIVATE) for r in (shell, second))


def test_a_detached_turn_whose_channel_left_is_approved_by_bxctl_watch(
    make_stack: Any,
) -> None:
    write = {"tool_calls": [["write_file", json.dumps({"path": "todo.md", "content": "tea\n"})]]}
    stack = make_stack({"replies": [write, {"content": "Written."}]}, policy=ASK_WRITES)
    watcher = Process([str(BIN / "bxctl"), "watch", "d1", "--yes"], stack.env, stack.root)
    try:
        watcher.err.wait_for("watching d1")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with sock:
            sock.settimeout(WAIT_S)
            sock.connect(str(stack.socket))
            turn = p.TurnFrame(p.SessionId("d1"), "Write it.", resume=False, detach=True)
            sock.sendall(p.dumps(turn) + b"\n")
        # Its channel is gone before the call: the watch, which can ask, is asked instead.
        watcher.out.wait_for("approved once (--yes): write_file todo.md")
        watcher.out.wait_for("Written.")
    finally:
        watcher.stop()
    assert (stack.workspace / "todo.md").read_text() == "tea\n"
    records = read_log(stack.home / "sessions" / "d1" / "0.jsonl")
    assert [(r.answer, r.by) for r in records if isinstance(r, p.ApprovalRecord)] == [
        (p.Answer.ONCE, p.ApprovedBy.CHANNEL)
    ]


def test_a_what_if_runs_the_calls_the_recording_lacks_through_brokerd_with_live_tools(
    make_stack: Any,
) -> None:
    """`bxctl replay --with ... --live-tools`: a call the recording does not hold is run by
    the real brokerd (SPEC section 20); without it, it is not run."""
    stack = make_stack(calls(("call_tool", {"name": "echo", "arguments": {"text": "live"}})))
    shutil.copytree(FIXTURES / "replay-tools", stack.home / "sessions" / "replay-tools")
    ran = bxctl(stack, "replay", "replay-tools", "--config", str(stack.config),
                "--with", "server=default", "--live-tools", "--turn", "1", "--json")  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    made = results(stack, report["what_if"])
    assert [r.content for r in made] == ["live"]  # brokerd's echo, not the recording's "hi"
    assert report["turns"][0]["what_if"]["tools"] == ["call_tool"]
