"""`decide_call`, the one place a call's verdict is made (`brokerd/policy/decide.py`), in
SPEC's order: the root, the grant or a rule, the session's grant, the definition's pin, the
taint, the confinement; and the policy's examples, which may state the taint and the sandbox,
decided through it."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from attrs import frozen

from boxmaker.brokerd.policy.decide import check_examples, decide_call
from boxmaker.brokerd.policy.rules import Decision, Policy, PolicyError, parse_policy
from boxmaker.brokerd.registry import Kind, McpTool, RegistryEntry, builtin_registry, entry_named
from boxmaker.proto import ToolSchema

POLICY = Path("/etc/boxmaker/policy.toml")
WORKSPACE = PurePosixPath("/home/me/workspace")
ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY
BUILTIN = builtin_registry()


@frozen
class Box:
    working: bool
    reason: str = "no bwrap here"


def policy(text: str) -> Policy:
    return parse_policy(text, POLICY, resolve=lambda path: Path(path))


def entry(tool: str) -> RegistryEntry:
    found = BUILTIN.get(tool)
    assert found is not None
    return found


def mcp_entry(tool: str, definition: str = "d1", read_only: bool = False) -> RegistryEntry:
    schema = ToolSchema(tool, "", {"type": "object"})
    return RegistryEntry(schema, definition, False, McpTool(schema, tool, read_only))


def verdict(pol: Policy, found: RegistryEntry, held: tuple[str, ...] = (), **kw: Any) -> Decision:
    arguments = kw.pop("arguments", {})
    kw.setdefault("sandbox", Box(True))
    return decide_call(pol, found, arguments, held, workspace=WORKSPACE, **kw).decision


ALL_ALLOWED = "\n".join(
    f'[grants.{tool}]\ndecision = "allow"'
    for tool in ("read_file", "write_file", "shell", "run_cell", "remember", "clock")
)


def test_each_tool_has_the_kind_that_says_which_rules_it_meets() -> None:
    kinds = {name: entry(name).kind for name in ("clock", "find_tool", "read_file", "shell")}
    assert kinds == {"clock": Kind.BUILTIN, "find_tool": Kind.BUILTIN, "read_file": Kind.FILE,
                     "shell": Kind.SANDBOXED}  # fmt: skip
    assert entry("remember").kind is Kind.MEMORY
    assert mcp_entry("srv.t").kind is Kind.MCP
    assert entry_named("srv.t").kind is Kind.MCP


def test_the_root_decides_before_the_grant() -> None:
    pol = policy(ALL_ALLOWED)
    assert verdict(pol, entry("read_file"), arguments={"path": "a.txt"}) is ALLOW
    assert verdict(pol, entry("read_file"), arguments={"path": "/etc/shadow"}) is DENY


def test_a_session_grant_lifts_an_ask_and_never_a_deny() -> None:
    pol = policy('[grants.clock]\ndecision = "ask"\n[grants.echo]\ndecision = "deny"')
    assert verdict(pol, entry("clock")) is ASK
    assert verdict(pol, entry("clock"), ("clock",)) is ALLOW
    assert verdict(pol, entry("echo"), ("echo",)) is DENY


def test_an_mcp_allow_holds_for_its_definition_only() -> None:
    pol = policy('[grants."srv.t"]\ndecision = "allow"\ndefinition = "d1"')
    assert verdict(pol, mcp_entry("srv.t", "d1")) is ALLOW
    assert verdict(pol, mcp_entry("srv.t", "d2")) is ASK


def test_taint_asks_an_allowed_call_that_sends_data_out_or_writes_the_notes() -> None:
    pol = policy(ALL_ALLOWED + '\n[grants.echo]\ndecision = "allow"\negress = true')
    assert verdict(pol, entry("echo"), tainted=True) is ASK
    assert verdict(pol, entry("remember"), tainted=True) is ASK
    assert verdict(pol, entry("clock"), tainted=True) is ALLOW  # neither
    assert verdict(pol, entry("echo"), tainted=False) is ALLOW
    net = policy('[grants."srv.t"]\ndecision = "allow"\ndefinition = "d1"')
    assert verdict(net, mcp_entry("srv.t"), tainted=True, network=True) is ASK
    assert verdict(net, mcp_entry("srv.t"), tainted=True) is ALLOW


def test_a_sandboxed_tool_runs_only_in_a_working_sandbox() -> None:
    pol = policy(ALL_ALLOWED)
    shell = {"arguments": {"command": "ls"}}
    assert verdict(pol, entry("shell"), **shell) is ALLOW
    assert verdict(pol, entry("shell"), sandbox=Box(False), **shell) is DENY
    assert verdict(pol, entry("shell"), sandbox=None, **shell) is DENY  # no hands
    loose = policy(ALL_ALLOWED + "\n[sandbox]\nunconfined = true")
    assert verdict(loose, entry("run_cell"), sandbox=Box(False), arguments={"code": "1"}) is ASK
    assert verdict(pol, entry("clock"), sandbox=Box(False)) is ALLOW  # not a sandboxed tool


def test_a_deny_stays_a_deny_whatever_comes_after() -> None:
    pol = policy('[grants.shell]\ndecision = "deny"\n[sandbox]\nunconfined = true')
    shell = {"arguments": {"command": "ls"}}
    assert verdict(pol, entry("shell"), sandbox=Box(False), tainted=True, **shell) is DENY


EXAMPLES = ALL_ALLOWED + '\n[grants.echo]\ndecision = "allow"\negress = true\n'


@pytest.mark.parametrize(
    ("example", "holds"),
    [
        ('tool = "echo"\narguments = { text = "x" }\ntainted = true\ndecision = "ask"', True),
        ('tool = "echo"\narguments = { text = "x" }\ntainted = true\ndecision = "allow"', False),
        ('tool = "echo"\narguments = { text = "x" }\ndecision = "allow"', True),
        (
            'tool = "shell"\narguments = { command = "ls" }\nsandbox = false\ndecision = "deny"',
            True,
        ),
        (
            'tool = "shell"\narguments = { command = "ls" }\nsandbox = false\ndecision = "allow"',
            False,
        ),
        ('tool = "shell"\narguments = { command = "ls" }\ndecision = "allow"', True),
        ('tool = "srv.t"\ndecision = "ask"', True),
    ],
)
def test_an_example_may_state_the_taint_and_the_sandbox(example: str, holds: bool) -> None:
    pol = policy(EXAMPLES + "[[examples]]\n" + example)
    if holds:
        check_examples(pol, WORKSPACE)
    else:
        with pytest.raises(PolicyError, match="example 1"):
            check_examples(pol, WORKSPACE)


def test_an_example_s_taint_and_sandbox_must_be_booleans() -> None:
    with pytest.raises(PolicyError, match="expected bool"):
        policy('[[examples]]\ntool = "clock"\ndecision = "allow"\ntainted = "yes"')


def test_the_shipped_examples_hold_with_the_sandbox_setting_the_file_invites() -> None:
    # policy.toml invites `[sandbox] unconfined = true`: its own examples must still hold,
    # or a new brokerd would refuse to start.
    from boxmaker.brokerd.policy.rules import SHIPPED_POLICY

    for text in (SHIPPED_POLICY, SHIPPED_POLICY + "\n[sandbox]\nunconfined = true\n"):
        check_examples(policy(text), WORKSPACE)
