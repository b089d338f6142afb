"""`loopd serve`'s self-test: everything it needs, checked before it binds the socket.

Each check says what it looked at and, when it fails, what to do. The daemon does not start
unless all pass (SPEC section 8). The first checks decide whether loopd may touch the home at
all, and nothing else is looked at until they pass: the home is loopd's user's alone, this is
the only loopd serving it (the home's lock, `lock.py`, taken here and kept in `SelfTest.lock`
for as long as loopd runs), and nothing in it or in the socket's folder could have been
written by another user (`store.trust`). Then, for each server the slots and tiers are on: it
answers `/health`; the model profile is chosen (`auto` asks the server what it serves) and the
check says which and why; and where slots are, the baseline a new session gets under that
profile fits its budget. Last, which server each tier resolves to (`tier_words`), and whether
the summary tier's context holds an epoch of the sessions' servers: a line of its own each,
never a failure (a summary that does not fit the tier is made by the session's own server).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import trio
from attrs import define, field

from .. import layout
from ..config import DEFAULT_SERVER, PURPOSES, Config, ServerConfig
from ..profiles import Choice, Profile, ProfileError, resolve_profile
from ..proto import Baseline
from ..serving import Checks, own_home, writable
from ..session import SessionError, check_budget, summary_cap, tier_holds
from ..store import problems_at_start, read_baseline
from .infer import Client, InferError, baseline_tokens, server_facts
from .service import memory_of

__all__ = ["LOCK_FILE", "SelfTest", "self_test", "tier_words"]

LOCK_FILE = layout.LOCK  # in the home: held by the one loopd serving it


@define
class SelfTest(Checks):
    config: Config | None = None
    profiles: dict[str, Profile] = field(factory=dict)  # by server name
    contexts: dict[str, int | None] = field(factory=dict)  # each server's, as it said it


async def self_test(config_path: Path, environ: Mapping[str, str] | None = None) -> SelfTest:
    """Run every check that can run; a failed one stops those that depend on it."""
    result = SelfTest()
    if (config := result.load(config_path, environ)) is None:
        return result
    result.config = config
    home = config.paths.home
    if not await trio.to_thread.run_sync(_own_home, home, result):
        return result  # another loopd, or not ours: nothing else is touched
    found = await trio.to_thread.run_sync(problems_at_start, home, config.channel.socket.parent)
    for said in found:
        result.add("trust", False, f"{said}; make it loopd's user's alone (chown, chmod go-w)")
    if found:
        return result
    result.add("trust", True, f"{home} and the socket's folder are loopd's user's alone")
    result.add("home", *await trio.to_thread.run_sync(_writable, home))
    baseline: Baseline | None = None
    try:
        baseline = await trio.to_thread.run_sync(
            lambda: read_baseline(config.baseline.system, memory_of(config)())
        )
    except SessionError as error:
        result.add("system.md", False, f"{error}; [baseline] system names it")
    else:
        tools = ", ".join(t.name for t in baseline.tools)
        result.add("baseline", True, f"{config.baseline.system} and tools {tools}")
    folder = config.channel.socket.parent
    try:
        await trio.to_thread.run_sync(_make_folder, folder)
    except OSError as error:
        result.add("socket folder", False, f"cannot create {folder}: {error.strerror}")
    else:
        result.add("socket folder", True, str(folder))
    environ = os.environ if environ is None else environ
    for name in config.servers_in_use():
        server = config.server_config(name)
        label = server.kind if name == DEFAULT_SERVER else f"{server.kind} {name}"
        async with Client(config, server=name, environ=environ) as client:
            if not await _health(client, server, label, result):
                continue
            choice = await _profile(client, config, name, result)
        if choice is None:
            continue
        result.profiles[name] = choice.profile
        has_slots = any(config.server_of(slot) == name for slot in config.slots)
        if baseline is not None and has_slots:  # a tier's server makes no session's baseline
            await _budget(config, name, choice.profile, environ, result)
    for purpose in PURPOSES:
        result.add(f"tier {purpose}", True, tier_words(config, purpose, result.contexts))
    return result


def _own_home(home: Path, result: SelfTest) -> bool:
    return own_home(home, result, LOCK_FILE, "loopd")


def _make_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def _writable(home: Path) -> tuple[bool, str]:
    if (failed := writable(home)) is not None:
        return False, f"{failed}; set [paths] home or BOXMAKER_HOME"
    return True, str(home)


async def _health(client: Client, server: ServerConfig, label: str, result: SelfTest) -> bool:
    """`/health` (or, on an OpenAI-style server without it, `/v1/models`) must answer 200
    within the connect timeout (503 while the model loads)."""
    url = server.base_url
    seconds = server.connect_timeout_s
    last = "no answer"
    with trio.move_on_after(seconds):
        while True:
            try:
                route = await client.health()
            except InferError as error:
                last = str(error)
            else:
                return result.add(label, True, f"{url}{route} answered 200")
            await trio.sleep(0.2)  # a real server starting: nothing to wait on but its answer
    return result.add(
        label,
        False,
        f"{url}/health did not answer 200 within {seconds:g} s ({last}); is the server "
        "running, and is its base_url right?",
    )


async def _profile(client: Client, config: Config, name: str, result: SelfTest) -> Choice | None:
    """The model profile of the server `name`: the one the config names, or `auto`'s pick
    from what the server says it serves."""
    check = "model profile" if name == DEFAULT_SERVER else f"model profile {name}"
    setting, said = config.model.profile, ""
    try:
        server = config.server_config(name)
        facts = await server_facts(client, server.kind, server.model)
    except InferError as error:
        facts, said = None, f" (the server did not say what it serves: {error})"
    result.contexts[name] = facts.n_ctx if facts is not None else None
    try:
        choice = resolve_profile(setting, facts)
    except ProfileError as error:
        result.add(check, False, str(error))
        return None
    how = "auto: " if setting == "auto" else ""
    profile = choice.profile
    tools = f"tools {profile.tool_mode} ({profile.tools})"
    result.add(check, True, f"{profile.name}, {tools}; {how}{choice.reason}{said}")
    return choice


async def _budget(
    config: Config, name: str, profile: Profile, environ: Mapping[str, str], result: SelfTest
) -> None:
    """The baseline of a new session under `profile` must fit `[baseline] max_tokens`."""
    check = "baseline budget" if name == DEFAULT_SERVER else f"baseline budget {name}"
    limit = config.baseline.max_tokens
    try:
        baseline = await trio.to_thread.run_sync(
            lambda: read_baseline(
                config.baseline.system, memory_of(config)(), profile, config.tools.core
            )
        )
        tokens, how = await baseline_tokens(config, name, baseline, environ=environ)
        await check_budget(baseline, lambda _baseline: _known(tokens), limit)
    except SessionError as error:  # BaselineTooLarge too
        result.add(check, False, str(error))
    except InferError as error:
        result.add(check, False, f"the server could not count tokens: {error}")
    else:
        result.add(check, True, f"{tokens} tokens of at most {limit}" + (f", {how}" if how else ""))


async def _known(tokens: int) -> int:
    return tokens


def tier_words(config: Config, purpose: str, contexts: Mapping[str, int | None]) -> str:
    """Where `purpose`'s requests go, in words; for `summary`, whether the tier's context
    (`contexts`, by server name) holds an epoch of the largest other server a slot is on: up
    to `[context] epoch_at` of that server's context, and the summary's cap (`tier_holds`)."""
    server = config.tier(purpose)
    if purpose == "chat":
        on = ", ".join(f"{slot} on {config.server_of(slot)}" for slot in config.chat_slots())
        which = "unset: a new session takes any slot of [slots]" if server is None else (
            f"server {server}: a new session takes one of its slots"
        )  # fmt: skip
        return f"{which} ({on}), and keeps it, and its server, for life"
    if server is None:
        if purpose == "summary":
            return "unset: each session's own server makes its summaries, on its own slot"
        return "unset: an image goes to the session's own server, when it takes images"
    slot_id = config.tier_slot(purpose)
    where = f"server {server}, " + (
        f"its slot {slot_id}" if slot_id is not None else "no slot named (the server picks)"
    )
    if purpose == "vision":
        return f"{where}: an image goes there, a conversation of its own"
    n_ctx = contexts.get(server)
    if n_ctx is None:
        return f"{where}: it did not say its context, so the session's server is used"
    others = sorted({config.server_of(slot) for slot in config.slots} - {server})
    if not others:
        return f"{where}: every slot is on it, so each session makes its summaries on its slot"
    known = [n for name in others if (n := contexts.get(name)) is not None]
    if len(known) < len(others):
        return (
            f"{where}: its context is {n_ctx:,} tokens, but not every session's server said its "
            "own, so whether it holds an epoch is not known (the session's server is used for a "
            "summary that does not fit)"
        )
    largest = max(known)
    tokens = config.context.epoch_at * largest
    cap = summary_cap(config.context.summary_max_tokens, largest)
    epoch = (
        f"an epoch (up to {tokens:,.0f} tokens at [context] epoch_at, and a {cap}-token summary)"
    )
    if tier_holds(tokens, cap, n_ctx):
        return f"{where}: its context ({n_ctx:,} tokens) holds {epoch}"
    return (
        f"{where}: its context ({n_ctx:,} tokens) does not hold {epoch}: the session's server "
        "is used for a summary that does not fit"
    )
