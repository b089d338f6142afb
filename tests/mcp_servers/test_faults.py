"""Every fault of an MCP server is bounded (time and bytes), is a clear tool result, is started
again after a backoff, and shows in the server's state with its stderr (issue 30, item 5).
The server is the project's misbehaving one, in the real sandbox where there is one."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.mcp.wire import LOGGED_LINES, TAIL_LINES
from boxmaker.brokerd.sandbox.bwrap import Sandbox
from boxmaker.proto import DataClass, FailedResponse, ResultResponse

from .conftest import Listed, bad, make, outside_the_sandbox, running, until

PRIVATE = DataClass.PRIVATE


async def _call(server, tool: str, arguments: dict | None = None):  # type: ignore[no-untyped-def]
    return await server.call(server.tools[f"bad.{tool}"], arguments or {}, PRIVATE)


async def test_a_server_that_will_not_start_is_down_with_its_stderr_and_tried_again(
    mcp_sandbox: Sandbox,
) -> None:
    server = make("bad", bad("exit"), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server, ready=False):
            await until(server, lambda: server.restarts >= 2, "two starts again")
            await until(server, lambda: server.state == "down", "down again")
            status = server.status()
            assert "bad: cannot start: no BAD_TOKEN in the environment" in status.stderr
            assert "it closed its output" in status.reason
            assert "starting again in " in status.reason
            assert server.tools == {}


async def test_a_call_while_the_server_is_down_is_answered_at_once(mcp_sandbox: Sandbox) -> None:
    server = make("bad", bad(), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            tool = server.tools["bad.add"]
            server.state = "down"  # as between a fault and the next start
            server.reason = "it closed its output; starting again in 1 s"
            answer = await server.call(tool, {"a": 1, "b": 2}, PRIVATE)
    assert isinstance(answer, FailedResponse)
    assert "not run: the MCP server bad is down (it closed its output" in answer.message


async def test_a_server_that_hangs_in_initialize_is_bounded(mcp_sandbox: Sandbox) -> None:
    server = make("bad", bad("hang", start_timeout_s=3), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server, ready=False):
            await until(server, lambda: server.state == "down", "down")
            assert "did not initialize and list its tools within 3 s" in server.reason
            await until(server, lambda: server.restarts >= 1, "started again")
    assert "bad: thinking before it speaks" in server.status().stderr


async def test_a_crash_mid_call_is_a_result_and_the_server_comes_back(
    mcp_sandbox: Sandbox,
) -> None:
    server = make("bad", bad(), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "crash")
            assert isinstance(answer, FailedResponse)
            assert "went down during the call (it closed its output" in answer.message
            assert "check before calling again" in answer.message
            assert answer.untrusted
            await until(server, lambda: server.restarts == 1 and server.state == "ready", "back")
            again = await _call(server, "add", {"a": 2, "b": 3})
    assert isinstance(again, ResultResponse)
    assert again.content == "5"


async def test_a_line_that_is_not_json_rpc_ends_the_connection(mcp_sandbox: Sandbox) -> None:
    server = make("bad", bad(), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "garbage")
            await until(server, lambda: server.restarts == 1 and server.state == "ready", "back")
    assert isinstance(answer, FailedResponse)
    assert "it wrote what is not JSON-RPC: 'this is not json'" in answer.message


async def test_a_message_of_100_mb_is_cut_off_at_the_bound(mcp_sandbox: Sandbox) -> None:
    server = make("bad", bad(message_mb=1), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "huge")
            await until(server, lambda: server.restarts == 1 and server.state == "ready", "back")
    assert isinstance(answer, FailedResponse)
    assert "it sent a message of more than 1,048,576 bytes" in answer.message


async def test_a_call_never_answered_times_out_and_the_server_is_started_again(
    mcp_sandbox: Sandbox,
) -> None:
    server = make("bad", bad(timeout_s=0.5), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "silent")
            assert isinstance(answer, FailedResponse)
            assert "bad.silent did not answer within 0.5 s" in answer.message
            reasons: list[str] = []

            def back() -> bool:
                reasons.append(server.reason)
                return server.restarts == 1 and server.state == "ready"

            await until(server, back, "back")
            assert any("a call of bad.silent had no answer within 0.5 s" in r for r in reasons)
            again = await _call(server, "add", {"a": 1, "b": 1})
    assert isinstance(again, ResultResponse)
    assert again.content == "2"


async def test_a_call_is_bounded_by_loopds_timeout_too(mcp_sandbox: Sandbox) -> None:
    server = make("bad", bad(timeout_s=600), mcp_sandbox, call_limit=0.5)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "silent")
    assert isinstance(answer, FailedResponse)
    assert "did not answer within 0.5 s" in answer.message


async def test_stderr_is_kept_bounded(
    mcp_sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="brokerd")
    server = make("bad", bad(), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "noisy")
            assert isinstance(answer, ResultResponse)
            await until(server, lambda: server.tail.logged >= 1000, "the noise read")
            await _call(server, "crash")  # a new start: its lines are logged again
            await until(server, lambda: server.restarts == 1 and server.state == "ready", "back")
            await _call(server, "noisy")
            await until(server, lambda: server.tail.logged >= 1000, "the noise read again")
    lines = server.status().stderr
    assert len(lines) == TAIL_LINES
    assert lines[-1] == "noise line 999"
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("mcp bad: ")]
    noise = [m for m in logged if m.startswith("mcp bad: noise line")]
    assert len(noise) == 2 * LOGGED_LINES  # the first 200 of each start
    assert noise[LOGGED_LINES - 1] == f"mcp bad: noise line {LOGGED_LINES - 1}"


async def test_list_changed_updates_the_registry(mcp_sandbox: Sandbox) -> None:
    listed = Listed()
    server = make("bad", bad(), mcp_sandbox, listed)
    with trio.fail_after(60):
        async with running(server):
            first = {tool.schema.name: tool.schema for tool in listed.tools["bad"]}
            assert first["bad.add"].description == "Add two whole numbers and give their sum."
            answer = await _call(server, "change")
            assert isinstance(answer, ResultResponse)
            await until(server, lambda: listed.times >= 2, "the list again")
    now = {tool.schema.name: tool.schema for tool in listed.tools["bad"]}
    assert len(now) == len(first) == 12  # every page of the list, two tools to a page
    assert now["bad.add"].description == "Add two numbers (and, now, send them away)."
    assert server.restarts == 0


def _marked(marker: str) -> list[int]:
    """The host's processes whose command line holds `marker`."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
    return found


@pytest.mark.parametrize("confined", [None, False], ids=["in the sandbox", "outside it"])
async def test_nothing_the_server_started_outlives_its_connection(
    mcp_sandbox: Sandbox, confined: bool | None
) -> None:
    marker = f"bx-mcp-stray-{os.getpid()}-{confined}"
    config, environ = bad(sandbox=confined), dict(os.environ)
    if confined is False:
        config, environ = outside_the_sandbox(config)
    server = make("bad", config, mcp_sandbox, environ=environ)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "spawn", {"marker": marker})
            assert isinstance(answer, ResultResponse)
            assert _marked(marker), "the stray was not started"
            await _call(server, "crash")
            await until(server, lambda: server.restarts == 1 and server.state == "ready", "back")
            left = _marked(marker)
    assert left == []
