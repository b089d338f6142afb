"""The peers row: the same ten-turn conversation through loopd and through the agent loops a
person would otherwise pick (pydantic-ai, the OpenAI Agents SDK, `llm`), on the real server
and against the fake.

On the real server each system has its own llama-server (the same ten turns from four clients
on one slot would hand each the others' cached prompts) behind its own recording proxy; the
figures are the bodies as sent and the server's own `timings`. Against the fake, a first
conversation through the proxies records each system's request bodies; then each completion
of later conversations, with no proxy, is paired with the same body sent straight to the fake
by a minimal client, as the loop overhead row does for loopd alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import trio

from ... import llama_build
from ...llama import open_llama_server
from ..harness import BIN, NATIVE, BenchError, direct_completion
from ..report import Row
from .checks import exchange_of
from .report import FakeRun, RealRun, peers_row
from .systems import Child, LoopdSystem, PeerSystem, System, converse, open_proxy
from .venvs import PEERS, TOP_LEVEL, PeerEnv, ensure_env, pinned

__all__ = ["MESSAGES", "SYSTEM_PROMPT", "run"]

SYSTEM_PROMPT = "You are a concise assistant. Answer in one or two sentences."
MESSAGES = (
    "Hello! My name is Ada and I keep bees in a small garden in Leeds.",
    "What is one thing I should check on my hives every week?",
    "Suggest a name for my oldest hive.",
    "How many frames does a standard National brood box hold?",
    "Give me one tip for handling bees calmly.",
    "I'm back after a break. Which city did I say my garden is in?",
    "What flowers could I plant nearby to help the bees in late summer?",
    "Summarise our conversation so far in one sentence.",
    "Translate 'the bees are calm today' into French.",
    "What is my name, and what name did you suggest for my oldest hive?",
)
MAX_TOKENS = 96  # SmolLM2 can ramble past the context at temperature 0 without a cap
SETTINGS = {"max_tokens": MAX_TOKENS, "temperature": 0.0}
TOKENS = 64  # the fake's answer, one token a millisecond, as in the loop overhead row
REPLY = " ".join(f"w{i}" for i in range(TOKENS))
# With reasoning: white space around the answer too, which must come back exactly.
REASONING, ANSWER = "The user asks about bees; keep it short.", "\n\nBees like lavender.  "
LOOPD_CONFIG = (
    f'[inference]\ntemperature = 0.0\nmax_tokens = {MAX_TOKENS}\n[baseline]\nsystem = "peers.md"\n'
    + NATIVE
)


async def run(root: Path, *, conversations: int) -> Row:
    envs = []
    for peer in PEERS:
        env = await trio.to_thread.run_sync(ensure_env, peer)
        print(f"peers: {'reused' if env.reused else 'made'} {env.folder}", flush=True)
        envs.append(env)
    real = await _on_real_server(root / "real", envs)
    fake = await _against_fake(root / "fake", envs, conversations)
    reasoned = await _with_reasoning(root / "reasoning", envs)
    versions = {env.peer: _version(env.peer) for env in envs}
    return peers_row(
        real,
        fake,
        reasoned,
        versions=versions,
        conversations=conversations,
        tokens=TOKENS,
        max_tokens=MAX_TOKENS,
    )


def _version(peer: str) -> str:
    top = TOP_LEVEL[peer]
    return f"{top} {pinned(peer)[top]}"


def _systems(root: Path, envs: Sequence[PeerEnv], urls: dict[str, str]) -> list[System]:
    """loopd and the peers, each with its own state under `root`, on its server's URL."""
    (root / "loopd").mkdir(parents=True, exist_ok=True)
    (root / "loopd" / "peers.md").write_text(SYSTEM_PROMPT + "\n")
    loopd = LoopdSystem(root / "loopd", urls["loopd"], LOOPD_CONFIG, "ten-turns", MESSAGES)
    systems: list[System] = [loopd]
    for env in envs:
        plan = {
            "base_url": urls[env.peer] + "/v1",
            "model": llama_build.MODEL_FILE,
            "system": SYSTEM_PROMPT,
            "messages": list(MESSAGES),
            "settings": SETTINGS,
        }
        systems.append(PeerSystem(env, root / env.peer / "state", plan))
    return systems


def _names(envs: Sequence[PeerEnv]) -> list[str]:
    return ["loopd", *(env.peer for env in envs)]


async def _proxies(stack: AsyncExitStack, root: Path, upstreams: dict[str, str]) -> dict[str, str]:
    """A recording proxy per system, logging to `root/<system>/requests.jsonl`."""
    urls = {}
    for name, upstream in upstreams.items():
        child, urls[name] = await open_proxy(root / name, upstream, BIN / "python")
        stack.push_async_callback(child.aclose)
    return urls


def _records(root: Path, name: str) -> list[dict[str, Any]]:
    path = root / name / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _chat(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if str(r["path"]).endswith("/chat/completions")]


async def _recorded(
    root: Path, envs: Sequence[PeerEnv], upstreams: dict[str, str]
) -> list[RealRun]:
    """One conversation through every system, each through its own recording proxy in front
    of its upstream: what each sent and was answered, and its times."""
    secs: dict[str, list[float]] = {name: [] for name in upstreams}

    async def turn(system: System, number: int) -> None:
        secs[system.name].append(await system.turn(number))

    async with AsyncExitStack() as stack:
        urls = await _proxies(stack, root, upstreams)
        startups = await converse(_systems(root, envs, urls), turn)
    runs = []
    for name in upstreams:
        records = _records(root, name)
        chat = _chat(records)
        if len(chat) != 10 or any(r["status"] != 200 for r in chat):
            raise BenchError(f"{name} made {len(chat)} chat requests, expected 10 answered")
        others = tuple(f"{r['method']} {r['path']}" for r in records if r not in chat)
        exchanges = tuple(exchange_of(r) for r in chat)
        runs.append(RealRun(name, exchanges, others, tuple(secs[name]), tuple(startups[name])))
    return runs


async def _on_real_server(root: Path, envs: Sequence[PeerEnv]) -> list[RealRun]:
    """A llama-server of its own for each system: ten identical conversations on one slot
    would each find the others' prompts in the cache."""
    async with AsyncExitStack() as stack:
        servers = {}
        for name in _names(envs):
            server = await stack.enter_async_context(open_llama_server(root / "logs"))
            servers[name] = server.url
        return await _recorded(root, envs, servers)


async def _fake(root: Path, *fake_args: str) -> tuple[Child, str]:
    args = [str(BIN / "python"), "-m", "boxmaker.testing", *fake_args]
    fake = await Child.open(args, name="the fake server", log=root / "fake.log", stdin=False)
    try:
        return fake, (await fake.line(60)).split()[-1]
    except BaseException:
        await fake.aclose()
        raise


async def _against_fake(root: Path, envs: Sequence[PeerEnv], conversations: int) -> list[FakeRun]:
    """A first conversation records each system's bodies; then each turn of later ones is
    paired with its body sent straight to the fake."""
    fake, url = await _fake(root, "--reply", REPLY, "--ms-per-token", "1.0")
    try:
        recorded = await _recorded(root / "recorded", envs, dict.fromkeys(_names(envs), url))
        bodies = {
            run.name: [e.body.encode("utf-8", "surrogateescape") for e in run.exchanges]
            for run in recorded
        }
        return await _paired(root, envs, url, bodies, conversations)
    finally:
        await fake.aclose()


async def _with_reasoning(root: Path, envs: Sequence[PeerEnv]) -> list[RealRun]:
    """One conversation against the fake scripted to reason before every answer; a fake of
    its own for each system, as on the real server (one slot would hold the others' prompts)."""
    script = _reasoning_script(root)
    async with AsyncExitStack() as stack:
        fakes = {}
        for name in _names(envs):
            fake, fakes[name] = await _fake(root / name, "--script", str(script))
            stack.push_async_callback(fake.aclose)
        return await _recorded(root, envs, fakes)


def _reasoning_script(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    script = root / "reasoning.json"
    script.write_text(json.dumps({"default": {"content": ANSWER, "reasoning": REASONING}}))
    return script


async def _paired(
    root: Path,
    envs: Sequence[PeerEnv],
    url: str,
    bodies: dict[str, list[bytes]],
    conversations: int,
) -> list[FakeRun]:
    pairs: dict[str, list[tuple[int, float, float]]] = {name: [] for name in _names(envs)}
    startups: dict[str, list[float]] = {name: [] for name in _names(envs)}
    count = 0
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:

        async def turn(system: System, number: int) -> None:
            nonlocal count
            count += 1
            body = bodies[system.name][number - 1]
            if count % 2:
                through = await system.turn(number)
                direct = await direct_completion(http, body)
            else:
                direct = await direct_completion(http, body)
                through = await system.turn(number)
            if direct.events != TOKENS:
                raise BenchError(f"the direct client had {direct.events} tokens, not {TOKENS}")
            _check_answer(system, number)
            pairs[system.name].append((number, through, direct.total))

        for index in range(conversations):
            systems = _systems(root / f"c{index}", envs, dict.fromkeys(_names(envs), url))
            for name, times in (await converse(systems, turn, rotation=index)).items():
                startups[name] += times
    return [FakeRun(name, tuple(pairs[name]), tuple(startups[name])) for name in _names(envs)]


def _check_answer(system: System, number: int) -> None:
    """A full answer came: every token to loopd's channel client, the whole text to a peer."""
    if isinstance(system, LoopdSystem):
        got = system.events.get(number)
        if got != TOKENS:
            raise BenchError(f"loopd's turn {number} had {got} content events, not {TOKENS}")
    elif isinstance(system, PeerSystem) and system.answers.get(number, "").strip() != REPLY:
        raise BenchError(f"{system.name}'s turn {number} answered {system.answers.get(number)!r}")
