"""An MCP server's tools in brokerd's `Broker`: found with `find_tool`, asked for until granted,
a grant held only for the definition it names (a tool that changes after it was trusted is
asked for again, saying why), the server's hints trusted only where the policy says, and
tools that send data out asked for while an untrusted result is in the conversation
(issue 30, items 2, 3 and 6). The server is the project's own, really running."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from boxmaker import proto as p
from boxmaker.brokerd import Broker, McpServer, builtin_registry
from boxmaker.brokerd.policy.rules import parse_policy
from boxmaker.brokerd.sandbox.bwrap import Sandbox
from boxmaker.clock import TickingClock
from boxmaker.proto import DataClass, encode

from .conftest import bad, running, until

S1, S2 = p.SessionId("s1"), p.SessionId("s2")
_calls = itertools.count(1)


@asynccontextmanager
async def broker_with_bad(
    tmp_path: Path, sandbox: Sandbox, policy: str = "", **config: Any
) -> AsyncIterator[tuple[Broker, McpServer]]:
    for folder in ("home", "ws"):
        (tmp_path / folder).mkdir(exist_ok=True)
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(policy)
    broker = Broker(builtin_registry(), parse_policy(policy, policy_file), tmp_path / "ws",
                    tmp_path / "home", TickingClock())  # fmt: skip
    server = McpServer("bad", bad(**config), sandbox, broker.update_tools, call_limit=60.0,
                       backoff=0.05)  # fmt: skip
    broker.servers = {"bad": server}
    with trio.fail_after(60):
        async with running(server):
            yield broker, server


def allow(broker: Broker, tool: str, tmp_path: Path, more: str = "") -> None:
    """The policy allows `tool` as the server defines it now."""
    entry = broker.registry.get(tool)
    assert entry is not None
    text = f'[grants."{tool}"]\ndecision = "allow"\ndefinition = "{entry.definition}"\n{more}'
    broker.policy = parse_policy(text, tmp_path / "policy.toml")


async def call(broker: Broker, tool: str, session: p.SessionId = S1, *, tainted: bool = False,
               **arguments: Any) -> p.ToolResponse:  # fmt: skip
    request = p.ToolRequest(session, next(_calls), tool, encode(arguments).decode(),
                            tainted=tainted)  # fmt: skip
    return await broker.call(request)


async def test_its_tools_are_found_never_core_and_asked_for(
    tmp_path: Path, mcp_sandbox: Sandbox
) -> None:
    async with broker_with_bad(tmp_path, mcp_sandbox) as (broker, _server):
        found = await call(broker, "find_tool", query="add two numbers sum")
        entry = broker.registry.get("bad.add")
        asked = await call(broker, "bad.add", a=1, b=2)
        assert isinstance(asked, p.PendingApprovalResponse)
        assert asked.summary.startswith("bad.add ")
        done = await broker.approve(S1, asked.id, p.Answer.ONCE)
    assert isinstance(found, p.ResultResponse)
    assert found.content.startswith('[{"name":"bad.add"')
    assert found.untrusted  # a server's descriptions are its words
    assert entry is not None
    assert not entry.core
    assert isinstance(done, p.ResultResponse)
    assert done.content == "3"
    assert done.untrusted


async def test_an_allow_holds_for_its_definition_only(tmp_path: Path, mcp_sandbox: Sandbox) -> None:
    async with broker_with_bad(tmp_path, mcp_sandbox) as (broker, server):
        allow(broker, "bad.add", tmp_path)
        first = await call(broker, "bad.add", a=2, b=2)
        before = server.changed
        changed = await call(broker, "bad.change")  # asked: it has no grant
        assert isinstance(changed, p.PendingApprovalResponse)
        await broker.approve(S1, changed.id, p.Answer.ONCE)
        await until(server, lambda: "send them away" in server.tools["bad.add"].schema.description
                    and before.is_set(), "the new definition")  # fmt: skip
        again = await call(broker, "bad.add", a=2, b=2)
        listing = {tool.schema.name: tool for tool in broker.listing().tools}
    assert isinstance(first, p.ResultResponse)
    assert first.content == "4"
    assert isinstance(again, p.PendingApprovalResponse)
    assert "[asked: its server changed its definition since it was allowed (" in again.summary
    assert "changed its definition since it was allowed" in listing["bad.add"].source
    assert listing["bad.add"].grant == "ask"


async def test_a_session_answer_and_an_always_pin_the_definition(
    tmp_path: Path, mcp_sandbox: Sandbox
) -> None:
    async with broker_with_bad(tmp_path, mcp_sandbox) as (broker, server):
        asked = await call(broker, "bad.add", a=1, b=1)
        assert isinstance(asked, p.PendingApprovalResponse)
        await broker.approve(S1, asked.id, p.Answer.SESSION)
        held = await call(broker, "bad.add", a=1, b=2)
        elsewhere = await call(broker, "bad.add", S2, a=1, b=3)
        asked = await call(broker, "bad.reads", S2, what="x")
        assert isinstance(asked, p.PendingApprovalResponse)
        await broker.approve(S2, asked.id, p.Answer.ALWAYS)
        entry = broker.registry.get("bad.reads")
        changing = await call(broker, "bad.change", S2)
        assert isinstance(changing, p.PendingApprovalResponse)
        await broker.approve(S2, changing.id, p.Answer.ONCE)
        await until(server, lambda: "send them away" in server.tools["bad.add"].schema.description,
                    "the new definition")  # fmt: skip
        after = await call(broker, "bad.add", a=1, b=4)  # the session's answer was for the old
    assert isinstance(held, p.ResultResponse)
    assert isinstance(elsewhere, p.PendingApprovalResponse)
    assert isinstance(after, p.PendingApprovalResponse)
    assert entry is not None
    written = (tmp_path / "policy.toml").read_text()
    assert f'definition = "{entry.definition}"' in written
    assert broker.policy.grant("bad.reads").definition == entry.definition


async def test_a_call_while_its_server_is_down_is_answered_at_once_never_asked(
    tmp_path: Path, mcp_sandbox: Sandbox
) -> None:
    async with broker_with_bad(tmp_path, mcp_sandbox, timeout_s=0.5) as (broker, server):
        allow(broker, "bad.silent", tmp_path)
        silent = await call(broker, "bad.silent")  # no answer: the server is started again
        assert isinstance(silent, p.FailedResponse)
        await until(server, lambda: server.state != "ready", "down")  # until it is up again
        answer = await call(broker, "bad.add", a=1, b=1)  # no grant: it would ask if it ran
    assert isinstance(answer, p.FailedResponse)
    assert answer.message.startswith("not run: the MCP server bad is ")
    assert answer.untrusted  # its reason may quote the server


async def test_the_owner_sees_an_mcp_calls_arguments_whole(
    tmp_path: Path, mcp_sandbox: Sandbox
) -> None:
    line = "x" * 300 + " send it to evil@example.invalid"
    async with broker_with_bad(tmp_path, mcp_sandbox) as (broker, _server):
        asked = await call(broker, "bad.write", line=line)
    assert isinstance(asked, p.PendingApprovalResponse)
    assert asked.summary == f'bad.write {{"line":"{line}"}}'


async def test_hints_are_trusted_only_where_the_policy_says(
    tmp_path: Path, mcp_sandbox: Sandbox
) -> None:
    async with broker_with_bad(tmp_path, mcp_sandbox) as (broker, _server):
        untrusted = await call(broker, "bad.reads", what="x")
        broker.policy = parse_policy("[mcp.bad]\ntrust_hints = true\nclass = \"secret\"\n",
                                     tmp_path / "policy.toml")  # fmt: skip
        trusted = await call(broker, "bad.reads", what="x")
        writes = await call(broker, "bad.add", a=1, b=1)
    assert isinstance(untrusted, p.PendingApprovalResponse)
    assert isinstance(trusted, p.ResultResponse)
    assert trusted.content == "looked up x"
    assert trusted.data_class is DataClass.SECRET
    assert isinstance(writes, p.PendingApprovalResponse)  # it says nothing of only reading


async def test_egress_is_asked_for_while_an_untrusted_result_is_in_view(
    tmp_path: Path, mcp_sandbox: Sandbox
) -> None:
    async with broker_with_bad(tmp_path, mcp_sandbox) as (broker, server):
        allow(broker, "bad.write", tmp_path, 'egress = true\n[grants.clock]\ndecision = "allow"\n')
        clean = await call(broker, "bad.write", line="one")
        tainted = await call(broker, "bad.write", tainted=True, line="two")
        assert isinstance(tainted, p.PendingApprovalResponse)
        await broker.approve(S1, tainted.id, p.Answer.SESSION)
        still = await call(broker, "bad.write", tainted=True, line="three")
        other = await call(broker, "clock", tainted=True)  # no egress: its grant holds
    assert isinstance(clean, p.ResultResponse)
    assert "[asked: it sends data out, and the conversation holds an untrusted" in tainted.summary
    assert isinstance(still, p.PendingApprovalResponse)  # a session answer does not lift it
    assert isinstance(other, p.ResultResponse)
    assert server.name == "bad"


async def test_every_tool_of_a_server_with_the_network_is_egress(
    tmp_path: Path, mcp_sandbox: Sandbox
) -> None:
    async with broker_with_bad(tmp_path, mcp_sandbox, network=True) as (broker, _server):
        allow(broker, "bad.add", tmp_path)
        clean = await call(broker, "bad.add", a=1, b=2)
        tainted = await call(broker, "bad.add", tainted=True, a=1, b=2)
    assert isinstance(clean, p.ResultResponse)
    assert isinstance(tainted, p.PendingApprovalResponse)
