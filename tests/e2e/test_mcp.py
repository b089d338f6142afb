"""End to end through a real brokerd with MCP servers configured (issue 30): the fake
llama-server finds an MCP tool with `find_tool` and runs it with `call_tool`; the owner is
asked for it; the server changes its list, crashes and comes back between turns, and every
request of the session still extends the one before (no cache loss, the same tools array);
a tool that sends data out is asked for once an untrusted result is in the conversation;
`bxctl tools` shows the servers."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from boxmaker import proto as p
from boxmaker.brokerd import SHIPPED_POLICY

from ..helpers import read_log
from ..mcp_servers.conftest import HERE, PYTHON_READ
from ..processes import BIN, Stack
from .test_broker import bxctl

BAD = [str(BIN / "python"), str(HERE / "bad_server.py")]
CONFIG = f"""\
[mcp.bad]
command = {json.dumps(BAD)}
read = {json.dumps([str(path) for path in (*PYTHON_READ, HERE)])}
timeout_s = 20
[mcp.time]
command = {json.dumps([str(BIN / "python"), "-m", "mcp_server_time", "--local-timezone", "UTC"])}
read = {json.dumps([str(path) for path in PYTHON_READ])}
"""
POLICY = SHIPPED_POLICY.replace(
    '[grants.echo]\ndecision = "allow"\n', '[grants.echo]\ndecision = "allow"\negress = true\n'
)
assert POLICY != SHIPPED_POLICY


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    inner = {"name": name, "arguments": arguments}
    return {"tool_calls": [["call_tool", json.dumps(inner)]]}


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [[name, json.dumps(arguments)]]}


SCRIPT = {
    "replies": [
        _call("echo", text="before"),  # turn 1: nothing untrusted yet: echo's allow holds
        _tool("find_tool", query="add two numbers"),
        _call("bad.add", a=2, b=3),
        {"content": "5."},
        _call("echo", text="after"),  # turn 2: an untrusted result is in view: asked
        _call("bad.change"),  # its list changes
        {"content": "Changed."},
        _call("bad.crash"),  # turn 3: it goes down mid-call
        {"content": "It crashed."},
        _call("bad.add", a=1, b=1),  # turn 4: back; asked again (the answer was once)
        _call("time.get_current_time", timezone="UTC"),
        _call("bad.image"),  # an image: a line for the model, its bytes kept beside the log
        {"content": "2."},
    ],
    "default": {"content": "More?"},
}


def test_mcp_tools_through_loopd_and_brokerd_keep_the_cache(tmp_path: Path) -> None:
    stack = Stack(tmp_path, SCRIPT, "--n-ctx", "100000", config=CONFIG, policy=POLICY)
    try:
        stack.brokerd.err.wait_for("mcp bad: ready")
        stack.brokerd.err.wait_for("mcp time: ready")
        for turn, say in enumerate(["Add 2 and 3.", "Change it.", "Crash it.", "Again."], 1):
            said = stack.bxctl("--session", "m1", "--yes", "--say", say)
            assert said.returncode == 0, (turn, said.stderr)
            if turn == 3:
                stack.brokerd.err.wait_for("mcp bad: ready", times=2)
        listing = bxctl(stack, "tools")
        verified = bxctl(stack, "verify", "m1")
        image = stack.home / "sessions" / "m1" / "results" / "9.1.png"
        kept = image.read_bytes()
        image.write_bytes(kept[:-1] + b"!")
        tampered = bxctl(stack, "verify", "m1")
        image.write_bytes(kept)  # as it was, for the replay when the stack stops
    finally:
        stack.stop()
    records = read_log(stack.home / "sessions" / "m1" / "0.jsonl")
    results = [r.content for r in records if isinstance(r, p.ToolResultRecord)]
    asked = [r.summary for r in records if isinstance(r, p.ApprovalRecord)]
    assert results[0] == "before"
    assert results[1].startswith('[{"name":"bad.add"')
    assert results[2] == "5"
    assert results[3] == "after"
    assert results[4] == "changed"
    assert "went down during the call" in results[5]
    assert results[6] == "2"
    assert json.loads(results[7])["timezone"] == "UTC"
    assert results[8] == ("here it is\n[image image/png, 70 bytes; not shown, kept with the "
                          "session's results as part 1]")  # fmt: skip
    image_record = [r for r in records if isinstance(r, p.ToolResultRecord)][8]
    assert [(k.file, k.mime) for k in image_record.kept] == [("9.1.png", "image/png")]
    assert kept.startswith(b"\x89PNG")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert tampered.returncode != 0
    assert "the attachment" in tampered.stdout + tampered.stderr
    tools = [
        "bad.add",
        "echo",
        "bad.change",
        "bad.crash",
        "bad.add",
        "time.get_current_time",
        "bad.image",
    ]
    assert [summary.split(" ")[0] for summary in asked] == tools
    assert "[asked: it sends data out, and the conversation holds an untrusted" in asked[1]
    untrusted = [r.untrusted for r in records if isinstance(r, p.ToolResultRecord)]
    # find_tool's (a server's descriptions), bad.add's, the crash's (its reason quotes the
    # server), every MCP result: untrusted; echo's: not.
    assert untrusted == [False, True, True, False, True, True, True, True, True]
    # The cache held on every request: no loss, and each reused all of the one before.
    assert not [r for r in records if isinstance(r, p.CacheLossRecord)]
    usage = [r for r in records if isinstance(r, p.UsageRecord)]
    for before, after in itertools.pairwise(usage):
        assert after.cache_n >= before.prompt_n, (before, after)
    assert listing.returncode == 0, listing.stderr
    assert "SERVER  STATE  TOOLS  LISTED               RESTARTS  WHY" in listing.stdout
    assert re.search(r"\nbad +ready +\d+ +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +\d", listing.stdout)
    assert "bad.add" in listing.stdout
