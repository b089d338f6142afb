"""`[server] kind = "openai"`: loopd against a server that answers as vLLM does (the fake's
`openai` mode): none of llama-server's fields sent, usage read for the figures, reasoning
under its other name, vLLM's errors, and whole turns."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from boxmaker import proto as p
from boxmaker.loopd.infer import (
    Client,
    Http,
    InferError,
    Stream,
    baseline_tokens,
    is_context_full,
)
from boxmaker.loopd.infer.request import output_tokens
from boxmaker.loopd.loop import SessionFull, run_turn
from boxmaker.profiles import load_profile
from boxmaker.session import assemble_baseline
from boxmaker.testing._render import render
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply, Timing
from boxmaker.tools import CORE_TOOLS

from ..helpers import SYSTEM, EventLog, deadline, make_config, open_rig

OPENAI = '[server]\nkind = "openai"\n'
# As loopd's self-test chooses it for the fake: `native`, with the context `/v1/models` says.
# Its context caps `max_tokens` (a quarter of 4096): vLLM refuses a request whose prompt and
# `max_tokens` together pass the context, and the default of 16,384 would.
NATIVE = attrs.evolve(load_profile("native"), context=4096)
REQUEST = p.ChatRequest(
    slot="main",
    messages=(p.SystemMessage("You are Boxmaker."), p.UserMessage("Hello")),
    tools=CORE_TOOLS,
)


async def ask(fake: FakeLlamaServer, config: str = "", request: p.ChatRequest = REQUEST
              ) -> tuple[EventLog, p.Completion]:  # fmt: skip
    log = EventLog()
    transport = fake.mock_transport()
    async with Client(make_config(OPENAI + config), transport=transport, profile=NATIVE) as client:
        return log, await client.chat(request, log)


async def test_the_body_has_none_of_llama_server_s_fields() -> None:
    fake = FakeLlamaServer(kind="openai", script=[Reply(content="Hi."), Reply(content="Hi.")])
    await ask(fake)
    await ask(fake, request=p.ChatRequest("main", REQUEST.messages, (), thinking=False))
    thinking, not_thinking = fake.requests[0]
    assert list(thinking) == ["messages", "tools", "stream", "stream_options", "max_tokens"]
    assert thinking["max_tokens"] == 1024
    assert thinking["stream_options"] == {"include_usage": True}
    assert list(not_thinking) == [
        "messages", "stream", "stream_options", "chat_template_kwargs", "max_tokens"
    ]  # fmt: skip
    assert not_thinking["chat_template_kwargs"] == {"enable_thinking": False}
    assert all(path != "/tokenize" and path != "/slots" for _m, path, _h in fake.received)


def test_max_tokens_is_capped_by_the_profile_and_by_an_openai_server_s_context() -> None:
    assert output_tokens(16384, None, 4096, llama=True) == 16384  # llama-server stops at the end
    assert output_tokens(16384, 256, None, llama=True) == 256  # the profile's output_cap
    assert output_tokens(48, 256, None, llama=True) == 48  # the config's, when lower
    assert output_tokens(16384, None, 4096, llama=False) == 1024  # a quarter of vLLM's context
    assert output_tokens(16384, None, None, llama=False) == 16384  # a context nobody said


async def test_the_figures_come_from_usage_and_the_cache_in_whole_blocks() -> None:
    fake = FakeLlamaServer(kind="openai", script=[Reply(content="One two three.")] * 2)
    log, first = await ask(fake)
    _, second = await ask(fake, request=attrs_messages(first))
    assert log.text() == "One two three."
    assert first.content == "One two three."
    assert log.of(p.Progress) == []  # vLLM says nothing while it reads the prompt
    assert first.timings.cache_n == 0
    assert first.timings.predicted_n == 5  # four tokens and the end of generation
    assert (first.timings.prompt_ms, first.timings.predicted_ms) == (0.0, 0.0)
    assert first.cache_block == 16
    prompt = first.timings.cache_n + first.timings.prompt_n
    assert second.timings.cache_n % 16 == 0
    assert prompt - 16 < second.timings.cache_n <= prompt + first.timings.predicted_n


def attrs_messages(completion: p.Completion) -> p.ChatRequest:
    messages = (*REQUEST.messages, p.AssistantMessage(completion.content or ""),
                p.UserMessage("And?"))  # fmt: skip
    return p.ChatRequest("main", messages, CORE_TOOLS)


async def test_without_prompt_tokens_details_the_cache_is_not_judged() -> None:
    fake = FakeLlamaServer(kind="openai", cached_tokens=False, script=[Reply(content="Hi.")])
    _, completion = await ask(fake)
    assert completion.cache_block == 0


async def test_reasoning_comes_under_its_other_name_and_the_server_s_count_caps_it() -> None:
    words = "one two three four five six seven eight nine ten"
    timing = Timing(merge_reasoning=3)  # ten tokens in seven deltas
    script = [Reply(reasoning=words, content="Done.")]
    fake = FakeLlamaServer(kind="openai", timing=timing, script=script)
    log, completion = await ask(fake, "[inference]\nthinking_cap = 10\n")
    assert completion.reasoning_content == words
    assert len(log.of(p.Reasoning)) == 7
    assert (completion.reasoning_tokens, completion.thinking_capped) == (10, True)
    assert log.of(p.ThinkingCapped) == [p.ThinkingCapped(tokens=10)]  # from usage, at the end
    assert all(path != "/tokenize" for _m, path, _h in fake.received)


async def test_tool_calls_are_assembled_as_vllm_sends_them() -> None:
    calls = (("clock", "{}"), ("find_tool", '{"query": "echo"}'))
    fake = FakeLlamaServer(kind="openai", script=[Reply(tool_calls=calls)])
    _, completion = await ask(fake)
    assert [(c.name, c.arguments) for c in completion.tool_calls] == list(calls)
    assert all(c.id.startswith("chatcmpl-tool-") for c in completion.tool_calls)
    assert completion.finish_reason == "tool_calls"


async def test_an_error_mid_stream_is_an_error_though_done_follows_it() -> None:
    fake = FakeLlamaServer(kind="openai", script=[Fault(FaultKind.ERROR_EVENT, after=2)])
    with pytest.raises(Stream, match="Invalid diff"):
        await ask(fake, "[inference]\nmax_attempts = 1\n")


async def test_vllm_s_context_full_400_is_the_context_full_error() -> None:
    fake = FakeLlamaServer(kind="openai", n_ctx=20, script=[Reply(content="Hi.")])
    with pytest.raises(InferError) as caught:
        await ask(fake, "[inference]\nmax_tokens = 16\n")
    assert is_context_full(caught.value)
    assert "However, the model's context length is only 20 tokens" in str(caught.value)


async def test_a_late_answer_never_sends_loopd_to_slots(autojump_clock: Any) -> None:
    fake = FakeLlamaServer(kind="openai", script=[Reply(content="Hi.")])
    fake.hold(0)
    log = EventLog()
    config = make_config(OPENAI)
    async with Client(config, transport=fake.mock_transport(), profile=NATIVE) as client:
        with deadline(5, "the held answer"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.chat, REQUEST, log)
                await trio.sleep(1)  # far past the 0.1 s after which llama-server is asked
                fake.release(0)
    assert log.of(p.Waiting) == []
    assert [path for _m, path, _h in fake.received] == ["/v1/chat/completions"]


async def test_the_baseline_is_counted_by_a_one_token_completion_s_usage() -> None:
    fake = FakeLlamaServer(kind="openai", script=[Reply(content="Hi there.")])
    baseline = assemble_baseline(SYSTEM, None)
    config = make_config(OPENAI)
    tokens, how = await baseline_tokens(
        config, "default", baseline, transport=fake.mock_transport()
    )
    [body] = fake.requests[0]
    assert body["max_tokens"] == 1
    assert tokens == len(render(body))  # the prompt the fake read
    assert how.startswith("by the usage of a one-token completion")


async def test_a_named_model_is_sent_and_a_server_without_health_is_up_by_its_models() -> None:
    fake = FakeLlamaServer(kind="openai", ollama=True, model="qwen3:8b", script=[Reply("Hi.")])
    config = make_config(OPENAI + 'model = "qwen3:8b"\n')
    async with Client(config, transport=fake.mock_transport(), profile=NATIVE) as client:
        assert await client.health() == "/v1/models"  # no /health: Ollama has none
        await client.chat(REQUEST, EventLog())
    [body] = fake.requests[0]
    assert list(body)[:3] == ["messages", "model", "tools"]  # the same for every request
    assert body["model"] == "qwen3:8b"
    unnamed = FakeLlamaServer(kind="openai", ollama=True, script=[Reply("Hi.")])
    with pytest.raises(Http, match="model is required"):
        await ask(unnamed, "[inference]\nmax_attempts = 1\n")
    assert "model" not in unnamed.requests[0][0]  # unset: none sent, as before
    llama = make_config()  # llama-server always has /health: a 404 there is an error
    async with Client(llama, transport=FakeLlamaServer(kind="openai", ollama=True)
                      .mock_transport()) as client:  # fmt: skip
        with pytest.raises(Http, match="answered 404"):
            await client.health()


# --- whole turns ------------------------------------------------------------------------------


async def test_whole_turns_with_a_tool_call_against_an_openai_style_server(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        kind="openai",
        script=[
            Reply(tool_calls=(("clock", "{}"),)),
            Reply(content="It is late."),
            Reply(content="You are welcome."),
        ],
    )
    async with open_rig(tmp_path, fake, OPENAI, profile=NATIVE) as rig:
        log = EventLog()
        outcome = await run_turn(rig.session, rig.runtime, "What time is it?", log)
        assert outcome.content == "It is late."
        await rig.reopen()
        thanks = await run_turn(rig.session, rig.runtime, "Thanks!", EventLog())
        assert thanks.content == "You are welcome."
        records = rig.session.records
    kinds = [p.unstructure(r)["type"] for r in records]
    assert kinds == [
        "session_start", "user", "assistant", "usage", "call_sent", "tool_result", "assistant",
        "usage", "turn_end", "user", "assistant", "usage", "turn_end",
    ]  # fmt: skip
    assert log.of(p.ToolCallStarted) == [p.ToolCallStarted(name="clock")]
    usages = [r for r in records if isinstance(r, p.UsageRecord)]
    assert all(u.cache_n % 16 == 0 for u in usages)
    assert usages[1].cache_n > 0
    assert usages[2].cache_n > usages[1].cache_n
    bodies = fake.requests[0]
    for before, after in itertools.pairwise(bodies):
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert "id_slot" not in after


async def test_a_full_context_on_an_openai_style_server_ends_the_turn_session_full(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(kind="openai", n_ctx=30, script=[Reply(content="Hi.")])
    async with open_rig(tmp_path, fake, OPENAI, profile=NATIVE) as rig:
        with pytest.raises(SessionFull):
            await run_turn(rig.session, rig.runtime, "word " * 40, EventLog())
