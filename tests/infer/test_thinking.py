"""The thinking cap counts tokens, not deltas: a server that merges tokens into fewer reasoning
deltas (the real one sent 16 tokens as 14, `recordings/thinking_capped.http`) still has its
capped completions marked, and the backstop still stops a runaway it does not enforce."""

from __future__ import annotations

from typing import Any

from boxmaker import proto as p
from boxmaker.loopd.infer import Client
from boxmaker.testing import FakeResponse
from boxmaker.testing.fake_server import FakeLlamaServer, Reply, Timing
from boxmaker.tools import CORE_TOOLS

from ..helpers import EventLog, make_config

REQUEST = p.ChatRequest(
    slot="main",
    messages=(p.SystemMessage("You are Boxmaker."), p.UserMessage("Think.")),
    tools=CORE_TOOLS,
)
THOUGHT = " ".join(f"step{i}" for i in range(300))


async def ask(fake: FakeLlamaServer, cap: int) -> tuple[EventLog, p.Completion]:
    log = EventLog()
    config = make_config(f"[inference]\nthinking_cap = {cap}\n")
    async with Client(config, transport=fake.mock_transport()) as client:
        return log, await client.chat(REQUEST, log)


def tokenized(fake: FakeLlamaServer) -> int:
    return sum(path == "/tokenize" for _m, path, _h in fake.received)


async def test_a_budget_reached_in_fewer_deltas_is_counted_by_the_tokenizer() -> None:
    fake = FakeLlamaServer(
        script=[Reply(reasoning=THOUGHT, content="Done.")], timing=Timing(merge_reasoning=8)
    )
    log, completion = await ask(fake, 16)
    assert len(log.of(p.Reasoning)) == 15  # the server's budget cut 16 tokens, in 15 deltas
    assert tokenized(fake) == 1
    assert (completion.reasoning_tokens, completion.thinking_capped) == (16, True)
    assert log.events[-1] == p.ThinkingCapped(tokens=16)  # known once the stream ended


async def test_counting_by_deltas_alone_would_miss_it() -> None:
    # What the issue saw on the real server: the deltas never reach the cap. Without an
    # answer from the tokenizer, the client can only go by them.
    fake = NoTokenizer(
        script=[Reply(reasoning=THOUGHT, content="Done.")], timing=Timing(merge_reasoning=8)
    )
    log, completion = await ask(fake, 16)
    assert (completion.reasoning_tokens, completion.thinking_capped) == (15, False)
    assert log.of(p.ThinkingCapped) == []


async def test_reasoning_far_below_the_cap_costs_no_request() -> None:
    fake = FakeLlamaServer(script=[Reply(reasoning="A short thought.", content="Done.")])
    _log, completion = await ask(fake, 4096)
    assert (completion.reasoning_tokens, completion.thinking_capped) == (4, False)
    assert tokenized(fake) == 0


async def test_the_backstop_counts_tokens_mid_stream() -> None:
    # The server does not enforce the budget and sends two tokens in every other delta:
    # by deltas the reasoning would pass cap + margin (128) only at its 129th delta, some
    # 190 tokens in; counted by the tokenizer it is stopped just past 128 tokens.
    fake = FakeLlamaServer(
        script=[Reply(reasoning=THOUGHT, content="Never seen."), Reply(content="Plain.")],
        timing=Timing(enforce_budget=False, merge_reasoning=2),
    )
    log, completion = await ask(fake, 64)
    deltas = log.of(p.Reasoning)
    shown = sum(len(e.text.split()) for e in deltas)  # type: ignore[attr-defined]
    assert 128 < shown <= 128 + 16  # within a step of the limit, counted in tokens
    assert len(deltas) < 100
    assert tokenized(fake) == 1  # at 64 deltas, 127 tokens: the deltas after it did the rest
    _first, second = fake.requests[0]
    assert second["chat_template_kwargs"] == {"enable_thinking": False}
    assert fake.disconnects == 1
    assert (completion.content, completion.thinking_capped) == ("Plain.", True)
    assert log.of(p.ThinkingCapped) == [p.ThinkingCapped(tokens=64)]


class NoTokenizer(FakeLlamaServer):
    """A server whose `/tokenize` fails (a proxy in front of it that does not pass it on)."""

    async def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes, connected: Any
    ) -> FakeResponse:
        if path == "/tokenize":
            self.received.append((method, path, headers))
            return FakeResponse(404, "Not Found", [("Content-Length", "0")], b"")
        return await super().handle(method, path, headers, body, connected)
