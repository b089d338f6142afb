"""SmolLM2 (fenced) finds an MCP tool with `find_tool` and runs it with `call_tool`, the
published `mcp-server-time` configured in brokerd (issue 30); the session's tools are `clock`,
`echo`, `find_tool` and `call_tool` (a fenced session has the last two only when `[tools]
core` names them). Reported, not asserted: which
blocks it wrote, what it searched for, what ran. Asserted: each turn ends done, every block
has its result, and the session's tools are those four."""

from __future__ import annotations

import json

import pytest

from boxmaker.brokerd import SHIPPED_POLICY
from boxmaker.proto import Baseline, loads
from boxmaker.tools.fenced import parse_blocks

from ..mcp_servers.conftest import PYTHON_READ
from ..processes import BIN
from .conftest import DeviceStack, figure
from .test_fenced import completions, kind_of

QUESTIONS = [
    "Use find_tool to find a tool for the current time in a time zone, then run it with "
    "call_tool for Europe/Paris.",
    "What time is it now in Tokyo? Find the right tool with find_tool first.",
    'Call call_tool with name "time.get_current_time" and arguments {"timezone": "UTC"}.',
    "Use the find_tool tool with the query: time zone.",
    "Search the tools for one that converts a time between time zones.",
]
SERVER = f"""\
[tools]
core = ["find_tool", "call_tool"]
[mcp.time]
command = {json.dumps([str(BIN / "python"), "-m", "mcp_server_time", "--local-timezone", "UTC"])}
read = {json.dumps([str(path) for path in PYTHON_READ])}
"""


def test_the_small_model_finds_and_calls_an_mcp_tool(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("mcp")
    (root / "policy.toml").write_text(SHIPPED_POLICY + "\n[mcp.time]\ntrust_hints = true\n")
    stack = DeviceStack(root, model='profile = "fenced"', inference=SERVER)
    lines = []
    try:
        stack.brokerd.err.wait_for("mcp time: ready")
        for number, question in enumerate(QUESTIONS, start=1):
            session = f"mcp{number}"
            result = stack.bxctl("--session", session, "--new", "--say", question)
            assert result.returncode == 0, result.stderr
            log = stack.log(session)
            baseline = loads(Baseline, (stack.home / "sessions" / session /
                                        "0.baseline.json").read_bytes())  # fmt: skip
            offered = [schema.name for schema in baseline.tools]
            assert offered == ["clock", "echo", "find_tool", "call_tool"]
            made, ran = [], []
            for record, results in completions(log):
                for call in parse_blocks(record["content"], offered):
                    assert call.id in results, f"no tool_result for {call.id}"
                    made.append(f"{call.name} {call.arguments}" if call.problem is None
                                else f"({kind_of(call.problem)}: {call.name})")  # fmt: skip
                    answer = results[call.id]
                    if call.name == "call_tool" and answer["untrusted"]:
                        ran.append(answer["content"][:70])
            lines.append(f"  {question!r}: blocks {made or 'none'}; an MCP tool ran: "
                         f"{ran or 'no'}; answer {result.stdout.strip()[:60]!r}")  # fmt: skip
            assert log[-1]["type"] == "turn_end"
            assert log[-1]["outcome"] == "done"
    finally:
        stack.stop()
    figure("fenced, an MCP tool found and called:\n" + "\n".join(lines))
