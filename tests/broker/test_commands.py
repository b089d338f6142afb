"""`shell`'s rules by command prefix: how a command is read, and the decision it gets."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from boxmaker.broker import Decision, PolicyError, decide, parse_policy
from boxmaker.broker.commands import PrefixRule, decide_command, simple_commands

ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY
RULES = (
    PrefixRule(("git", "status"), ALLOW),
    PrefixRule(("git",), ASK),
    PrefixRule(("rm",), DENY),
)


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("git status", [["git", "status"]]),
        ("FOO=1 git push origin", [["git", "push", "origin"]]),
        ("ls; rm -rf x", [["ls"], ["rm", "-rf", "x"]]),
        ("a && b | c\nd", [["a"], ["b"], ["c"], ["d"]]),
        ('echo "a; rm x"', [["echo", "a; rm x"]]),
        ("echo $(rm x)", None),
        ("echo `rm x`", None),
        ("cat <<EOF\nrm\nEOF", None),
        ("echo 'unclosed", None),
    ],
)
def test_a_command_is_read_as_its_simple_commands(command: str, words: object) -> None:
    assert simple_commands(command) == words


@pytest.mark.parametrize(
    ("command", "grant", "decision"),
    [
        ("git status", ASK, ALLOW),  # the longest prefix wins
        ("git push", ALLOW, ASK),
        ("ls -la", ALLOW, ALLOW),  # no rule: the grant
        ("ls -la", ASK, ASK),
        ("ls && rm -rf /workspace", ALLOW, DENY),  # the strictest part
        ("git status; git push", ALLOW, ASK),
        ("echo $(rm x)", ALLOW, DENY),  # unreadable: the strictest of the grant and every rule
        ("rmdir x", ALLOW, ALLOW),  # a prefix is whole words
    ],
)
def test_the_decision_is_the_strictest_of_its_parts(
    command: str, grant: Decision, decision: Decision
) -> None:
    assert decide_command(RULES, grant, command)[0] is decision


POLICY = """
[grants.shell]
decision = "allow"
[[grants.shell.prefixes]]
prefix = ["git", "push"]
decision = "ask"
[[examples]]
tool = "shell"
arguments = { command = "git push origin main" }
decision = "ask"
"""


def test_the_policy_reads_prefix_rules_and_a_session_answer_does_not_lift_them() -> None:
    policy = parse_policy(POLICY, Path("/p/policy.toml"))
    workspace = PurePosixPath("/w")
    assert policy.prefixes == (PrefixRule(("git", "push"), ASK),)
    push = {"command": "git push origin main"}
    assert decide(policy, workspace, "shell", push).decision is ASK
    assert decide(policy, workspace, "shell", push, {"shell"}).decision is ASK
    assert decide(policy, workspace, "shell", {"command": "ls"}).decision is ALLOW
    assert decide(policy, workspace, "shell", {"command": 3}).decision is DENY


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[grants.shell]\nprefixes = [{prefix = [], decision = "ask"}]', "expected words"),
        ('[grants.shell]\nprefixes = [{prefix = ["x"], decision = "maybe"}]', "expected one of"),
        ("[grants.echo]\nprefixes = []", "unknown field @ $.grants.echo.prefixes"),
        ("[sandbox]\nunconfined = 1", "expected bool"),
    ],
)
def test_a_bad_rule_is_refused_with_its_key(text: str, said: str) -> None:
    with pytest.raises(PolicyError, match=said.replace("$", r"\$").replace(".", r"\.")):
        parse_policy(text, Path("/p/policy.toml"))
