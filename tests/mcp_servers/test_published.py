"""brokerd's client against MCP servers the project did not write, at pinned versions: the
reference `mcp-server-time` (Python) and `server-everything` (Node), each in the sandbox
where there is one, through the SDK's `ClientSession` on trio (issue 30, items 1 and 4)."""

from __future__ import annotations

import sniffio
import trio

from boxmaker.brokerd.mcp.server import McpServer
from boxmaker.brokerd.sandbox.bwrap import Sandbox
from boxmaker.proto import DataClass, ResultResponse, parse_json

from .conftest import Listed, everything, make, running, time_server


async def _call(server: McpServer, tool: str, **arguments: object) -> ResultResponse:
    answer = await server.call(server.tools[tool], dict(arguments), DataClass.PRIVATE)
    assert isinstance(answer, ResultResponse), answer
    return answer


async def test_the_sdk_runs_on_trio(mcp_sandbox: Sandbox) -> None:
    """The SDK is anyio's: under brokerd's trio it must run on trio's own loop."""
    assert sniffio.current_async_library() == "trio"
    server = make("time", time_server(), mcp_sandbox)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "time.get_current_time", timezone="UTC")
    assert sniffio.current_async_library() == "trio"
    assert parse_json(answer.content)["timezone"] == "UTC"


async def test_the_python_time_server(mcp_sandbox: Sandbox) -> None:
    listed = Listed()
    server = make("time", time_server(), mcp_sandbox, listed)
    with trio.fail_after(60):
        async with running(server):
            answer = await _call(server, "time.convert_time", source_timezone="UTC",
                                 time="12:00", target_timezone="Asia/Tokyo")  # fmt: skip
    names = sorted(tool.schema.name for tool in listed.tools["time"])
    assert names == ["time.convert_time", "time.get_current_time"]
    converted = parse_json(answer.content)
    assert converted["target"]["datetime"].endswith("T21:00:00+09:00")
    assert answer.untrusted
    assert answer.data_class is DataClass.PRIVATE
    assert server.status().reason.startswith(
        "in the sandbox" if mcp_sandbox.working else "not in a sandbox"
    )


async def test_the_node_everything_server(mcp_sandbox: Sandbox) -> None:
    config = everything()
    listed = Listed()
    server = make("every", config, mcp_sandbox, listed)
    with trio.fail_after(60):
        async with running(server):
            echo = await _call(server, "every.echo", message="hello")
            image = await _call(server, "every.get-tiny-image")
            total = await _call(server, "every.get-sum", a=2, b=40)
            weather = await _call(server, "every.get-structured-content", location="Chicago")
    names = {tool.schema.name for tool in listed.tools["every"]}
    assert {"every.echo", "every.get-sum", "every.get-tiny-image"} <= names
    assert echo.content == "Echo: hello"
    assert echo.untrusted
    assert "[image image/png, " in image.content
    assert " bytes; not shown, kept with the session's results as part 1]" in image.content
    assert len(image.attachments) == 1
    assert "iVBOR" not in image.content  # the bytes are not the model's to read
    assert "42" in total.content
    assert set(parse_json(weather.content)) >= {"temperature", "conditions"}


async def test_a_server_gets_only_the_environment_its_config_names(mcp_sandbox: Sandbox) -> None:
    config = everything(env=("BOX_PASSED", "BOX_ABSENT"))
    environ = {"BOX_PASSED": "yes", "BOX_SECRET": "the owner's token", "PATH": "/usr/bin"}
    server = make("every", config, mcp_sandbox, environ=environ)
    with trio.fail_after(60):
        async with running(server):
            shown = await _call(server, "every.get-env")
    env = parse_json(shown.content)
    assert env["BOX_PASSED"] == "yes"
    assert "BOX_SECRET" not in env
    assert "BOX_ABSENT" not in env
    assert "the owner's token" not in shown.content
