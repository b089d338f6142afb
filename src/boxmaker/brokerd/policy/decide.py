"""The verdict on one call, made in one place (SPEC section 14). `decide_call` takes the
policy, the registry entry (its `kind` says which rules apply), the arguments, the grants the
owner gave the session, whether the conversation holds an untrusted result, and the sandbox's
state, and returns the verdict in SPEC's order:

1. the root a file tool's path lands in, and what that root grants;
2. the tool's grant, or a `shell` rule by command prefix;
3. the session's grant (the owner's `session` answer);
4. for an MCP tool, the definition its allow was given for (`decide_mcp`);
5. the session's mode, once sessions have one: a deny stays a deny, `read-only` denies a
   write or a run, `ask` asks what was allowed (the place is marked below);
6. the taint: an allowed call that sends data out, writes the notes, or makes or cancels a
   schedule, is asked for while the conversation holds an untrusted result;
7. the confinement: `shell` and `run_cell` run only in a working sandbox (or, unconfined as
   the policy says, ask every call).

`check_examples` decides the policy's examples through it. Pure.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import PurePosixPath
from typing import Any, Protocol

from attrs import frozen

from ...tools import CANCEL_SCHEDULE, FORGET, REMEMBER, SCHEDULE
from ..registry import Kind, RegistryEntry, entry_named
from ._toml import Decision, PolicyError
from ._toml import shown as _shown
from .rules import Example, Policy, Verdict, decide, decide_mcp

__all__ = ["SandboxState", "check_examples", "confine", "decide_call", "when_tainted"]

WRITES_NOTES = frozenset((REMEMBER.name, FORGET.name))
CHANGES_SCHEDULES = frozenset((SCHEDULE.name, CANCEL_SCHEDULE.name))


class SandboxState(Protocol):
    """What `decide_call` needs of the sandbox (`sandbox.bwrap.Sandbox` is one)."""

    @property
    def working(self) -> bool: ...

    @property
    def reason(self) -> str: ...


@frozen
class Stated:
    """A sandbox as a policy example states it."""

    working: bool
    reason: str = "the example says there is none"


def decide_call(
    policy: Policy,
    entry: RegistryEntry,
    arguments: dict[str, Any],
    held: Collection[str] = (),
    *,
    workspace: PurePosixPath,
    tainted: bool = False,
    sandbox: SandboxState | None = None,
    network: bool = False,
) -> Verdict:
    """The verdict on a call of `entry` with `arguments` (already checked against its schema),
    in a session holding `held`; `tainted`: the conversation holds an untrusted result;
    `sandbox`: None when brokerd runs without hands; `network`: the tool's MCP server reaches
    the network. Never raises."""
    tool = entry.schema.name
    if entry.kind is Kind.MCP:
        read_only = entry.mcp is not None and entry.mcp.read_only
        verdict = decide_mcp(policy, tool, entry.definition, read_only, held)
    else:
        verdict = decide(policy, workspace, tool, arguments, held)
    # The session's mode (SPEC section 21) applies here: after the grant, before the taint.
    if tainted and verdict.decision is Decision.ALLOW:
        verdict = when_tainted(tool, verdict, egress=policy.egress(tool, network))
    if entry.kind is Kind.SANDBOXED:
        verdict = confine(sandbox, policy, verdict)
    return verdict


# While an untrusted result is in the conversation, these are asked whatever their grant.
_TAINT_NOTES = {
    "egress": "it sends data out, and the conversation holds an untrusted result (which may "
    "carry instructions planted for the model): asked whatever its grant",
    "memory": "it changes the notes later conversations read, and the conversation holds an "
    "untrusted result (which may carry words planted for the model): asked whatever its grant",
    "schedule": "it makes or cancels a turn that runs later without the owner, and the "
    "conversation holds an untrusted result (which may carry words planted for the model): "
    "asked whatever its grant",
}


def when_tainted(tool: str, verdict: Verdict, *, egress: bool) -> Verdict:
    """An allowed call's verdict in a conversation that holds an untrusted result: a tool that
    sends data out, a write to the notes (`remember`, `forget`: text read from a file must
    not plant a memory), and a schedule made or cancelled (its turns run later, without the
    owner), are asked for."""
    kind = (
        "egress"
        if egress
        else "memory"
        if tool in WRITES_NOTES
        else "schedule"
        if tool in CHANGES_SCHEDULES
        else None
    )
    if kind is None:
        return verdict
    note = _TAINT_NOTES[kind]
    return Verdict(
        Decision.ASK, f"{tool}: {note}", f"{kind} ({verdict.source})", verdict.located, note
    )


def confine(sandbox: SandboxState | None, policy: Policy, verdict: Verdict) -> Verdict:
    """The verdict for a call of a sandboxed tool, given the policy's: unchanged where the
    sandbox works; else denied, or asked when the policy runs them unconfined (`sandbox` None:
    brokerd was started without hands)."""
    if verdict.decision is Decision.DENY or (sandbox is not None and sandbox.working):
        return verdict
    why = sandbox.reason if sandbox is not None else "brokerd was started without one"
    source = f"{policy.path.name} [sandbox]"
    if policy.unconfined and sandbox is not None:  # without hands nothing could run it
        return Verdict(
            Decision.ASK,
            f"no sandbox here ({why}); the policy runs shell and "
            "run_cell unconfined, so every call asks the owner",
            source,
        )
    return Verdict(
        Decision.DENY,
        f"shell and run_cell run only in a sandbox, and there is none "
        f"here: {why}. (The owner may set [sandbox] unconfined = true in "
        f"{policy.path.name}: then every call asks.)",
        source,
    )


def check_examples(policy: Policy, workspace: PurePosixPath) -> None:
    """Decide each of the policy's examples through `decide_call` (with no session grants; an
    MCP tool as its grant pins it, a read-only hint not given).

    Raises:
        PolicyError: naming the first example whose decision is not the one it expects.
    """
    for number, example in enumerate(policy.examples, 1):
        verdict = _decided(policy, workspace, example)
        if verdict.decision is not example.decision:
            raise PolicyError(
                f"{policy.path}: example {number} ({example.tool} {_shown(example.arguments)}) "
                f"expects {example.decision.value}, the policy gives {verdict.decision.value}: "
                f"{verdict.reason}"
            )


def _decided(policy: Policy, workspace: PurePosixPath, example: Example) -> Verdict:
    grant = policy.grants.get(example.tool)
    entry = entry_named(example.tool, grant.definition if grant is not None else None)
    return decide_call(
        policy,
        entry,
        example.arguments,
        workspace=workspace,
        tainted=example.tainted,
        sandbox=Stated(example.sandbox),
    )
