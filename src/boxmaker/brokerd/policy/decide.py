"""The verdict on one call, made in one place (SPEC section 14). `decide_call` takes the
policy, the registry entry (its `kind` says which rules apply), the arguments, the grants the
owner gave the session, whether the conversation holds an untrusted result, and the sandbox's
state, and returns the verdict in SPEC's order:

1. the root a file tool's path lands in, and what that root grants;
2. the tool's grant, or a `shell` rule by command prefix;
3. the session's grant (the owner's `session` answer);
4. for an MCP tool, the definition its allow was given for (`decide_mcp`);
5. the session's mode (SPEC section 21): a deny stays a deny, `read-only` denies a call
   that may write or run, `ask` asks for each of them (`once` or `deny`) whatever its grant
   (`with_mode`);
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

from ...proto import Mode
from ...tools import CANCEL_SCHEDULE, FORGET, REMEMBER, SCHEDULE
from ..registry import Kind, RegistryEntry, entry_named
from ._toml import Decision, PolicyError
from ._toml import shown as _shown
from .rules import Example, Policy, Verdict, decide, decide_mcp

__all__ = [
    "SandboxState",
    "check_examples",
    "confine",
    "decide_call",
    "when_tainted",
    "with_mode",
    "writes_or_runs",
]

WRITES_NOTES = frozenset((REMEMBER.name, FORGET.name))
CHANGES_SCHEDULES = frozenset((SCHEDULE.name, CANCEL_SCHEDULE.name))
# brokerd's own tools that may write or run: what `read-only` denies and `ask` asks for.
WRITES_OR_RUNS = frozenset(
    ("write_file", "edit_file", "shell", "run_cell", *WRITES_NOTES, *CHANGES_SCHEDULES)
)


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
    mode: Mode = Mode.AUTO,
) -> Verdict:
    """The verdict on a call of `entry` with `arguments` (already checked against its schema),
    in a session holding `held`; `tainted`: the conversation holds an untrusted result;
    `sandbox`: None when brokerd runs without hands; `network`: the tool's MCP server reaches
    the network; `mode` the session's. Never raises."""
    tool = entry.schema.name
    if entry.kind is Kind.MCP:
        read_only = entry.mcp is not None and entry.mcp.read_only
        verdict = decide_mcp(policy, tool, entry.definition, read_only, held)
    else:
        verdict = decide(policy, workspace, tool, arguments, held)
    if mode is not Mode.AUTO and writes_or_runs(policy, entry):  # after the grant, before taint
        verdict = with_mode(mode, tool, verdict)
    if tainted and verdict.decision is Decision.ALLOW:
        verdict = when_tainted(tool, verdict, egress=policy.egress(tool, network))
    if entry.kind is Kind.SANDBOXED:
        verdict = confine(sandbox, policy, verdict)
    return verdict


def writes_or_runs(policy: Policy, entry: RegistryEntry) -> bool:
    """Whether a call of `entry` may write or run: brokerd's tools that do, and an MCP tool
    unless the owner's policy takes its server's word that it only reads (`trust_hints`)."""
    if entry.kind is Kind.MCP:
        read_only = entry.mcp is not None and entry.mcp.read_only
        server = entry.schema.name.partition(".")[0]
        return not (read_only and policy.server(server).trust_hints)
    return entry.schema.name in WRITES_OR_RUNS


READ_ONLY = (
    "this session is read-only: {tool} may write or run, so it was not run (the owner can "
    "change the session's mode)"
)
ASK_MODE = "the session is in ask mode: every call that may write or run is asked, once"


def with_mode(mode: Mode, tool: str, verdict: Verdict) -> Verdict:
    """The verdict on a call that may write or run, in a session in `mode`: a deny stays a
    deny; `read-only` denies; `ask` asks (`once` or `deny`: no grant is kept) what the policy
    allowed or asked; `auto` leaves it. A mode never widens what the policy decided."""
    if verdict.decision is Decision.DENY or mode is Mode.AUTO:
        return verdict
    source = f"the session's mode ({mode.value})"
    if mode is Mode.READ_ONLY:
        return Verdict(Decision.DENY, READ_ONLY.format(tool=tool), source, verdict.located)
    note = ASK_MODE if verdict.decision is Decision.ALLOW else f"{verdict.note}; {ASK_MODE}"
    return Verdict(
        Decision.ASK,
        f"{tool} needs the owner's approval: {ASK_MODE}",
        f"{source}; {verdict.source}",
        verdict.located,
        note.lstrip("; "),
        only_once=True,
    )


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
            only_once=verdict.only_once,
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
