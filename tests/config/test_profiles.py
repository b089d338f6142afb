"""Model profiles: the ones shipped, a bad one refused by its key, and `auto` on what real
servers said of themselves (`recordings/props.http`) and on the fake in both kinds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from boxmaker.config import DEFAULT_CORE
from boxmaker.loopd.infer import Client, server_facts
from boxmaker.profiles import (
    ProfileError,
    ServerFacts,
    choose_profile,
    load_profile,
    parse_profile,
    profile_names,
    resolve_profile,
)
from boxmaker.session import profile_baseline
from boxmaker.testing import FakeLlamaServer
from boxmaker.testing.recording import Exchange, load_recording
from boxmaker.tools import BUILTIN_TOOLS, CORE_TOOLS

from ..helpers import make_config

RECORDINGS = Path(__file__).parents[2] / "recordings"


def recorded_props() -> list[Exchange]:
    """`/props` of the model's own template (no tool calls), then of Qwen2.5's (tool calls)."""
    exchanges = load_recording((RECORDINGS / "props.http").read_bytes()).exchanges
    assert [(e.method, e.path, e.status) for e in exchanges] == [("GET", "/props", 200)] * 2
    return list(exchanges)


async def facts_of(exchange: Exchange) -> ServerFacts:
    """What `server_facts` reads of a recorded `/props` answer, replayed by the fake."""
    fake = FakeLlamaServer(exchanges=[exchange])
    async with Client(make_config(), transport=fake.mock_transport()) as client:
        return await server_facts(client, "llama-server")


def renamed(exchange: Exchange, model: str) -> Exchange:
    """The same answer from a server that serves another model."""
    props: dict[str, Any] = json.loads(exchange.response_body)
    props["model_alias"] = props["model_path"] = model
    body = json.dumps(props).encode()
    headers = tuple((k, str(len(body)) if k == "Content-Length" else v)
                    for k, v in exchange.response_headers)  # fmt: skip
    return attrs.evolve(exchange, response_body=body, response_headers=headers)


def test_every_shipped_profile_is_valid_and_its_examples_name_a_tool() -> None:
    assert {"native", "fenced", "smollm2-135m"} <= set(profile_names())
    tools = {schema.name for schema in BUILTIN_TOOLS}
    for name in profile_names():
        profile = load_profile(name)
        assert profile.name == name
        assert profile.description
        assert all(example.tool in tools for example in profile.examples), name


def test_a_profile_with_a_mistake_is_refused_by_its_key() -> None:
    with pytest.raises(ProfileError, match=r"profile 'x': .*tool_mode"):
        parse_profile("x", 'description = "d"\ntool_mode = "xml"\n')
    with pytest.raises(ProfileError, match=r"unknown field @ \$.colour"):
        parse_profile("x", 'description = "d"\ncolour = 1\n')
    with pytest.raises(ProfileError, match="are for the fenced tool mode only"):
        parse_profile("x", 'description = "d"\n[[examples]]\nuser = "u"\ntool = "clock"\n')
    with pytest.raises(ProfileError, match="no model profile 'gpt'; there are: fenced, native"):
        load_profile("gpt")


async def test_auto_on_the_real_server_s_props_picks_smollm2_by_its_model() -> None:
    own, qwen = recorded_props()
    facts = await facts_of(own)
    assert facts.model is not None
    assert facts.model.endswith("/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert (facts.n_ctx, facts.tool_calls) == (4096, False)
    choice = choose_profile(facts)
    assert choice.profile.name == "smollm2-135m"
    assert choice.profile.context == 4096  # the server's slot, not the profile's 8192
    assert "smollm2-135m-instruct.q4_1.gguf ('smollm2-135m')" in choice.reason
    # The same model under a template with tool calls is still the model that never makes
    # one by itself: the model's name decides first.
    assert (await facts_of(qwen)).tool_calls is True
    assert choose_profile(await facts_of(qwen)).profile.name == "smollm2-135m"


async def test_auto_on_the_real_server_s_props_reads_tool_support_for_an_unknown_model() -> None:
    own, qwen = (renamed(e, "/models/unknown-7b.gguf") for e in recorded_props())
    fenced = choose_profile(await facts_of(own))
    assert fenced.profile.name == "fenced"
    assert fenced.reason.startswith("no profile matches the model unknown-7b.gguf; its chat ")
    assert "template has no tool calls" in fenced.reason
    native = choose_profile(await facts_of(qwen))
    assert native.profile.name == "native"
    assert "its chat template makes tool calls" in native.reason


async def test_the_fake_s_props_say_what_the_real_server_s_do() -> None:
    own, _qwen = recorded_props()
    real = json.loads(own.response_body)
    fake = FakeLlamaServer(model=real["model_alias"], tool_calls=False)
    async with Client(make_config(), transport=fake.mock_transport()) as client:
        said = await client.call_json("GET", "/props")
        assert await server_facts(client, "llama-server") == await facts_of(own)
    assert list(said) == list(real)  # the same keys, in the server's order
    assert list(said["chat_template_caps"]) == list(real["chat_template_caps"])
    assert list(said["default_generation_settings"]) == list(real["default_generation_settings"])


async def test_server_facts_of_an_openai_style_server_come_from_its_models() -> None:
    fake = FakeLlamaServer(kind="openai", model="Qwen/Qwen3-8B", n_ctx=32768)
    async with Client(make_config(), transport=fake.mock_transport()) as client:
        facts = await server_facts(client, "openai")
    assert facts == ServerFacts("Qwen/Qwen3-8B", 32768, None)
    choice = choose_profile(facts)
    assert (choice.profile.name, choice.profile.context) == ("qwen3", 32768)
    async with Client(make_config(), transport=fake.mock_transport()) as client:
        named = await server_facts(client, "openai", "Qwen/Qwen3-8B")  # `[server] model`
        other = await server_facts(client, "openai", "llama3.2:3b")  # one /v1/models omits
    assert named == facts
    assert other == ServerFacts("llama3.2:3b", None, None)  # not the first one's context
    two = {"object": "list", "data": [{"id": "a:1b", "max_model_len": 2048},
                                      {"id": "b:8b", "max_model_len": 8192}]}  # fmt: skip
    body = json.dumps(two).encode()
    models = Exchange("GET", "/v1/models", (), None, 200, "OK",
                      (("Content-Length", str(len(body))),), body)  # fmt: skip
    fake = FakeLlamaServer(exchanges=[models])
    async with Client(make_config(), transport=fake.mock_transport()) as client:
        second = await server_facts(client, "openai", "b:8b")
    assert second == ServerFacts("b:8b", 8192, None)  # the named one's, not the first's


def test_a_named_profile_keeps_its_name_and_takes_the_server_s_context() -> None:
    choice = resolve_profile("fenced", ServerFacts("m.gguf", 2048, True))
    assert (choice.profile.name, choice.profile.context) == ("fenced", 2048)
    assert choice.reason.startswith("named in the config")
    assert resolve_profile("native", None).profile.context is None


def test_a_fenced_profile_s_baseline_freezes_its_tools_and_examples() -> None:
    baseline = profile_baseline("You are X.", None, load_profile("fenced"))
    assert [tool.name for tool in baseline.tools] == ["clock", "echo"]
    assert baseline.fenced is not None
    assert baseline.system.startswith("You are X.\n\n## Tools\n")
    assert [type(m).__name__ for m in baseline.fenced.examples] == [
        "UserMessage", "AssistantMessage", "UserMessage", "AssistantMessage",
    ]  # fmt: skip
    assert baseline.fenced.examples[1].content == (
        '```tool\n{"name": "echo", "arguments": {"text": "apple"}}\n```'
    )
    whole = profile_baseline("You are X.", None, load_profile("smollm2-135m"))
    assert whole.fenced is not None
    assert [m.content for m in whole.fenced.examples[2:4]] == ["Tool result: apple", "apple"]
    files = profile_baseline("You are X.", None, load_profile("smollm2-135m"), DEFAULT_CORE)
    assert [tool.name for tool in files.tools] == ["clock", "echo", "read_file"]  # only_tools
    assert files.fenced is not None
    assert "read_file" in files.fenced.examples[1].content  # its example joins with the tool
    assert not any("read_file" in str(m.content) for m in whole.fenced.examples)
    native = profile_baseline("You are X.", None, load_profile("native"))
    assert [tool.name for tool in native.tools] == [t.name for t in CORE_TOOLS]
    assert native.fenced is None
    assert native.system == "You are X."
