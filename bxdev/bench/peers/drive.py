"""`python -P drive.py PEER PLAN`: one peer's side of the ten-turn conversation, run by the
peers row under that peer's own virtual environment (never under the checkout's).

PLAN is a JSON file: `base_url`, `model`, `state` (the folder where the peer keeps its
history), `system`, `messages` (the ten user messages) and `settings` (`max_tokens`,
`temperature`). The driver sets the peer up, prints `{"ready": true}`, then for each line
`N` it reads runs turn N (the peer's own call, streaming, and the peer's own way of keeping
the history) and prints `{"turn": N, "secs": S, "answer": A}`; `secs` runs from the call to
the full answer, the history saved. It ends at the end of its input. A new process picks the
history up where the last one left it: that is the restart between turns 5 and 6.

Standard library only, apart from the peer itself, imported inside its function: each
environment holds one peer. `-P` keeps this folder off `sys.path`, so nothing here shadows a
peer's own modules.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

Turn = Callable[[int], Awaitable[str]]


def _say(**fields: object) -> None:
    print(json.dumps(fields, ensure_ascii=False), flush=True)


async def _pydantic_ai(plan: dict[str, Any]) -> Turn:
    """An `Agent` on the OpenAI-compatible chat model; the history is `all_messages()`,
    kept as JSON by `ModelMessagesTypeAdapter` (the persistence pydantic-ai's docs show)."""
    from pydantic_ai import (  # type: ignore[import-not-found, unused-ignore]
        Agent,
        ModelMessagesTypeAdapter,
    )
    from pydantic_ai.models.openai import (  # type: ignore[import-not-found, unused-ignore]
        OpenAIChatModel,
    )
    from pydantic_ai.providers.openai import (  # type: ignore[import-not-found, unused-ignore]
        OpenAIProvider,
    )
    from pydantic_ai.settings import ModelSettings  # type: ignore[import-not-found, unused-ignore]

    provider = OpenAIProvider(base_url=plan["base_url"], api_key="sk-no-key")
    agent = Agent(
        OpenAIChatModel(plan["model"], provider=provider),
        system_prompt=plan["system"],
        model_settings=ModelSettings(**plan["settings"]),
    )
    path = Path(plan["state"]) / "history.json"
    history = ModelMessagesTypeAdapter.validate_json(path.read_bytes()) if path.exists() else []

    async def turn(number: int) -> str:
        nonlocal history
        answer = ""
        async with agent.run_stream(
            plan["messages"][number - 1], message_history=history
        ) as result:
            async for text in result.stream_text():  # the whole text so far, each time
                answer = text
        history = result.all_messages()
        path.write_bytes(ModelMessagesTypeAdapter.dump_json(history))
        return str(answer)

    return turn


async def _openai_agents(plan: dict[str, Any]) -> Turn:
    """An `Agent` on the SDK's chat-completions model (llama-server has no Responses API);
    the history in the SDK's own `SQLiteSession`. Tracing is off: it would upload."""
    from agents import (  # type: ignore[import-not-found, unused-ignore]
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        SQLiteSession,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI  # type: ignore[import-not-found, unused-ignore]

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=plan["base_url"], api_key="sk-no-key")
    agent = Agent(
        name="Assistant",
        instructions=plan["system"],
        model=OpenAIChatCompletionsModel(model=plan["model"], openai_client=client),
        model_settings=ModelSettings(**plan["settings"]),
    )
    session = SQLiteSession("ten-turns", db_path=Path(plan["state"]) / "session.sqlite")

    async def turn(number: int) -> str:
        result = Runner.run_streamed(agent, plan["messages"][number - 1], session=session)
        async for _event in result.stream_events():
            pass
        return str(result.final_output)

    return turn


async def _llm(plan: dict[str, Any]) -> Turn:
    """Simon Willison's `llm` as a person uses it: one `llm prompt` process per turn, the
    first with the system prompt (`-s`), the others continuing the conversation (`-c`) from
    llm's own log (`logs.db` under `LLM_USER_PATH`). The model is declared in llm's
    `extra-openai-models.yaml` with `api_base` (the llm-llama-server plugin is the same model
    class with `api_base` fixed at localhost:8080)."""
    home = Path(plan["state"]) / "llm-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: bench-local\n  model_name: {json.dumps(plan['model'])}\n"
        f"  api_base: {json.dumps(plan['base_url'])}\n"
    )
    env = {**os.environ, "LLM_USER_PATH": str(home)}
    llm = str(Path(sys.executable).parent / "llm")
    options = [arg for key, value in plan["settings"].items() for arg in ("-o", key, str(value))]

    async def turn(number: int) -> str:
        first = ["-s", plan["system"]] if number == 1 else ["-c"]
        args = [llm, "prompt", "-m", "bench-local", *first, *options, plan["messages"][number - 1]]
        done = await asyncio.to_thread(
            subprocess.run,
            args,
            env=env,
            stdin=subprocess.DEVNULL,  # else llm reads this driver's input as part of the prompt
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode:
            raise RuntimeError(f"llm prompt failed ({done.returncode}): {done.stderr}")
        return done.stdout.removesuffix("\n")

    return turn


PEERS: dict[str, Callable[[dict[str, Any]], Awaitable[Turn]]] = {
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _openai_agents,
    "llm": _llm,
}


async def _main(peer: str, plan: dict[str, Any]) -> None:
    turn = await PEERS[peer](plan)
    _say(ready=True)
    while line := await asyncio.to_thread(sys.stdin.readline):
        number = int(line)
        start = time.perf_counter()
        answer = await turn(number)
        _say(turn=number, secs=time.perf_counter() - start, answer=answer)


def main() -> None:
    plan = json.loads(Path(sys.argv[2]).read_text())
    Path(plan["state"]).mkdir(parents=True, exist_ok=True)
    asyncio.run(_main(sys.argv[1], plan))


if __name__ == "__main__":
    main()
