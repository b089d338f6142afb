"""The baseline: the system text and the tool schemas every request of an epoch starts with.

Assembled when a session is created, from `system.md` and the owner's memory (`core.md` and
the pinned notes, `memory.baseline_memory`); written to `0.baseline.json` and read back from
there on resume, never from `system.md` again, so an edit to `system.md` only reaches new
sessions and every old request stays byte-identical. Nothing volatile is ever in it: no time,
no date, no counters, no session id. The model profile decides the rest (`profile_baseline`):
the core tools or every tool of the registry, and for a fenced profile the system message's
part on tools and the example exchanges, frozen here with the rest so that a later change of
the profile never reaches an existing session.

A new epoch's baseline (`next_baseline`) is the only other one made: the same system prompt,
tools and examples, with the memory as it is then (SPEC section 17). Memory never enters a
running epoch. Pure; reading the files is the caller's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from ..profiles import Profile
from ..proto import (
    AssistantMessage,
    Baseline,
    ChatMessage,
    Fenced,
    ToolSchema,
    UserMessage,
    dumps,
    loads,
)
from ..tools import CORE_TOOLS, block_text, session_tools, tool_section
from .errors import BaselineTooLarge
from .replay import result_message

__all__ = [
    "assemble_baseline",
    "baseline_bytes",
    "check_budget",
    "next_baseline",
    "parse_baseline",
    "profile_baseline",
    "sha256_hex",
]


def assemble_baseline(
    system: str,
    memory: str | None,
    tools: tuple[ToolSchema, ...] = CORE_TOOLS,
    fenced: Fenced | None = None,
) -> Baseline:
    """`system.md`'s text, then a blank line and the memory if there is any (`core.md` and
    the pinned notes); for a fenced session then a blank line and the part on its tools. The
    baseline keeps which part was memory, so the next epoch's can hold that day's instead."""
    text = system.rstrip("\n")
    kept = memory.rstrip("\n") if memory is not None and memory.strip() else ""
    if kept:
        text += "\n\n" + kept
    if fenced is not None:
        text += "\n\n" + tool_section(tools, fenced.results, fenced.prefix)
    return Baseline(system=text, tools=tools, fenced=fenced, memory=kept)


def next_baseline(baseline: Baseline, memory: str) -> Baseline:
    """The baseline of the epoch after one with `baseline`: its system prompt, tools and
    examples, with `memory` as it is now. A baseline made before memory (its `memory` is None,
    so which part of its text was `core.md` is not known) is repeated as it is, as every
    epoch's baseline was then."""
    if baseline.memory is None:
        return baseline
    text: str | None = baseline.system
    fenced = baseline.fenced
    if fenced is not None:
        text = _without(text, "\n\n" + tool_section(baseline.tools, fenced.results, fenced.prefix))
    if baseline.memory:
        text = _without(text, "\n\n" + baseline.memory)
    if text is None:  # not as this module writes it: keep what the session had
        return baseline
    return assemble_baseline(text, memory, baseline.tools, fenced)


def _without(text: str | None, end: str) -> str | None:
    return text[: -len(end)] if text is not None and text.endswith(end) else None


def profile_baseline(
    system: str, core_memory: str | None, profile: Profile, core: tuple[str, ...] = ()
) -> Baseline:
    """The baseline of a new session under `profile`: its tools (the four core ones and the
    config's `core`, or for a profile given its tools by name `clock`, `echo` and `core`),
    and for a fenced profile how results go back and
    its example exchanges (an example naming a tool the session lacks is left out)."""
    tools = session_tools(core, every=profile.tools != "core")
    if profile.only_tools:
        tools = tuple(tool for tool in tools if tool.name in profile.only_tools)
    if not profile.fenced:
        return assemble_baseline(system, core_memory, tools)
    fenced = Fenced(profile.results, profile.result_prefix, profile.result_suffix, ())
    names = {tool.name for tool in tools}
    examples: list[ChatMessage] = []
    for number, example in enumerate(profile.examples, start=1):
        if example.tool is None:  # a question answered in plain words, no block
            answer = example.answer or ""
            examples += [UserMessage(content=example.user), AssistantMessage(content=answer)]
            continue
        if example.tool not in names:
            continue
        examples += [
            UserMessage(content=example.user),
            AssistantMessage(content=block_text(example.tool, example.arguments)),
        ]
        if example.result is not None:
            examples.append(result_message(fenced, f"example-{number}", example.result))
            if example.answer is not None:
                examples.append(AssistantMessage(content=example.answer))
    return assemble_baseline(
        system,
        core_memory,
        tools,
        Fenced(fenced.results, fenced.prefix, fenced.suffix, tuple(examples)),
    )


def baseline_bytes(baseline: Baseline) -> bytes:
    """The bytes of `0.baseline.json`: compact JSON, then a newline."""
    return dumps(baseline) + b"\n"


def parse_baseline(data: bytes) -> Baseline:
    """Raises `proto.DecodeError` for bytes that are not a baseline."""
    return loads(Baseline, data)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def check_budget(
    baseline: Baseline, count_tokens: Callable[[Baseline], Awaitable[int]], max_tokens: int
) -> int:
    """Count the baseline's tokens with the server's tokenizer (`count_tokens`).

    Returns:
        The count.

    Raises:
        BaselineTooLarge: naming both numbers, when the count is over `max_tokens`.
    """
    tokens = await count_tokens(baseline)
    if tokens > max_tokens:
        raise BaselineTooLarge(tokens, max_tokens)
    return tokens
