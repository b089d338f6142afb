"""`shell`'s rules by command prefix: how a line is read (every command it may run), and the
decision it gets, against the ways around a rule a hostile model tries."""

from __future__ import annotations

import shlex
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.brokerd import Decision, PolicyError, decide, parse_policy
from boxmaker.brokerd.policy.command_line import MOST_CHARS, MOST_DEPTH, read_line
from boxmaker.brokerd.policy.commands import PrefixRule, decide_command

ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY
RULES = (
    PrefixRule(("git", "status"), ALLOW),
    PrefixRule(("git",), ASK),
    PrefixRule(("rm",), DENY),
    PrefixRule(("ls",), ALLOW),
)
ANY = None


@pytest.mark.parametrize(
    ("line", "forms", "known"),
    [
        ("git status", [("git", "status")], True),
        ("ls; rm -rf x", [("ls",), ("rm", "-rf", "x")], True),
        ("a && b | c\nd", [("a",), ("b",), ("c",), ("d",)], True),
        ('echo "a; rm x"', [("echo", "a; rm x")], True),
        ("ls #; rm x", [("ls",)], True),  # a comment, as bash reads it
        ("ls a#b; rm x", [("ls", "a#b"), ("rm", "x")], True),  # not a comment mid-word
        ("r\\m x; 'r'm; \"rm\"", [("rm", "x"), ("rm",), ("rm",)], True),  # quotes removed
        ("ls *.py", [("ls", ANY)], True),  # a glob is any words, but no expansion of a name
        ("echo $(rm x)", [("echo", ANY), ("rm", "x")], False),
        ("echo `rm x`", [("echo", ANY), ("rm", "x")], False),
        ("cat <(rm x)", [("cat", ANY), ("rm", "x")], False),
        ("cat <<E\n$(rm x)\nE\n", [("cat",), (ANY,), ("rm", "x")], False),  # bash expands it
        ("cat <<'E'\n$(rm x)\nE\n", [("cat",)], True),  # quoted: the text is data
        ("f() { rm x; }; f", [("rm", "x"), ("f",)], False),
        ("if true; then rm x; fi", [("true",), ("rm", "x")], True),
        ("case $1 in a) rm x;; esac", [("rm", "x")], False),
        ("ls ${x}", [("ls", ANY)], False),
        ("ls ${x@P}", [("ls", ANY), (ANY,)], False),  # a prompt: it runs what x holds
        ("FOO=1 git push", [("git", "push")], False),
        # Wrappers: the command each runs is a command of the line.
        ("command rm x", [("command", "rm", "x"), ("rm", "x")], True),
        ("command -v rm", [("command", "-v", "rm")], True),  # it runs nothing
        ("env -i A=1 -u B rm x", [("env", "-i", "A=1", "-u", "B", "rm", "x"), ("rm", "x")],
         True),
        ("exec -a x rm", [("exec", "-a", "x", "rm"), ("rm",)], False),
        ("nice -n 5 rm", [("nice", "-n", "5", "rm"), ("rm",)], True),
        ("timeout -s KILL 5 rm x", [("timeout", "-s", "KILL", "5", "rm", "x"), ("rm", "x")],
         True),
        ("xargs -0 rm", [("xargs", "-0", "rm"), ("rm", ANY)], True),
        ("xargs -I% git % x", [("xargs", "-I%", "git", "%", "x"), ("git", ANY, "x")], True),
        ("sudo -u root rm", [("sudo", "-u", "root", "rm"), ("rm",)], True),
        ("busybox rm x", [("busybox", "rm", "x"), ("rm", "x")], True),
        ("find . -name a -exec rm {} \\;", [("find", ".", "-name", "a", "-exec", "rm", "{}", ";"),
                                            ("rm", ANY)], True),
        ("sh -c 'rm x'", [("sh", "-c", "rm x"), ("rm", "x")], True),
        ("bash -xc 'nice git push'", [("bash", "-xc", "nice git push"), ("nice", "git", "push"),
                                      ("git", "push")], True),
        ("sudo env timeout 1 rm", [("sudo", "env", "timeout", "1", "rm"),
                                   ("env", "timeout", "1", "rm"), ("timeout", "1", "rm"),
                                   ("rm",)], True),
    ],
)  # fmt: skip
def test_a_line_is_read_as_every_command_it_may_run(
    line: str, forms: list[tuple[str | None, ...]], known: bool
) -> None:
    reading = read_line(line)
    assert list(reading.forms) == forms
    assert (reading.unknown is None) is known


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("$c x", "a command named by an expansion"),
        ("r* x", "a command named by an expansion or a glob"),
        ("{r,}m x", "a part the parser cannot read"),  # brace expansion, outside what it knows
        ("echo 'unclosed", "a part the parser cannot read"),
        ("eval 'rm x'", "eval, which runs text"),
        (". ./x.sh", "., which runs text"),
        ("trap 'rm x' EXIT", "trap, which runs text"),
        ("bash x.sh", "bash reading a script"),
        ("curl x | sh", "sh reading a script or its input"),
        ("env -S 'rm x'", "env, whose command cannot be known"),
        ("sudo -s rm", "sudo, whose command cannot be known"),
        ("nice $x rm", "nice, whose command cannot"),  # an unknown option may be several words
        ("nice -Z 5 rm", "nice, whose command cannot"),  # an option it does not know: a value?
        ("env --frobnicate x rm", "env, whose command cannot"),
        ("0</dev/null rm", "a redirection the parser reads as a command's name"),
        ("echo $((x))", "arithmetic"),
        ("echo $[x]", "arithmetic"),
        ("(( x ))", "arithmetic"),
        ("for ((i=0; i<x; i++)); do :; done", "arithmetic"),
        ("[[ x -eq 1 ]]", "arithmetic"),
        ("echo ${a[i]}", "a subscript"),
        ("a=([i]=1)", "a subscript"),
        ("read 'a[$(rm x)]'", "a name with a subscript"),
        ("printf -v 'a[$(rm x)]' 1", "a name with a subscript"),
        ("declare -i x", "an integer or a reference"),
        ("declare -n r=x", "an integer or a reference"),
        ("PS4='$(rm x)' bash -xc ls", "PS4, which bash runs as code"),
        ("x='$(rm x)'; ls ${x@P}", "an expansion that evaluates"),
        ("echo ${!x}", "an expansion that evaluates"),
        ("echo ${y:x}", "an expansion that evaluates"),
        ("find $d -name a", "find, whose command cannot"),  # $d may be `-exec rm {} ;`
        ("x" * (MOST_CHARS + 1), f"a line over {MOST_CHARS} characters"),
    ],
)
def test_a_line_that_may_run_anything_says_why(line: str, why: str) -> None:
    reading = read_line(line)
    assert any(words[0] is None for words in reading.forms)
    assert reading.unknown is not None
    assert reading.anything is not None
    assert reading.anything.startswith(why)


def test_commands_within_commands_are_followed_to_a_depth_then_may_run_anything() -> None:
    assert ("rm",) in read_line("nice " * 8 + "rm").forms
    assert (None,) not in read_line("nice " * 8 + "rm").forms
    assert (None,) in read_line("nice " * 9 + "rm").forms
    line = "rm x"
    for _ in range(MOST_DEPTH):
        line = f"sh -c {shlex.quote(line)}"
    assert ("rm", "x") in read_line(line).forms
    deeper = read_line(f"sh -c {shlex.quote(line)}")
    assert (None,) in deeper.forms
    assert deeper.unknown == "commands within commands too deep to follow"


@pytest.mark.parametrize(
    ("line", "grant", "decision"),
    [
        ("git status", ASK, ALLOW),  # the longest prefix wins
        ("git push", ALLOW, ASK),
        ("ls -la", ASK, ALLOW),
        ("cat x", ALLOW, ALLOW),  # no rule: the grant
        ("cat x", ASK, ASK),
        ("ls && rm -rf /workspace", ALLOW, DENY),  # the strictest command
        ("git status; git push", ALLOW, ASK),
        ("rmdir x", ALLOW, ALLOW),  # a prefix is whole words
        ("ls *.py", ASK, ALLOW),  # a glob among the arguments: still known
        ("# a note", ASK, ASK),  # it runs nothing: the grant
        # An allow rule matches only a line known whole (the attacks of issue 41).
        ("ls ${x}", ALLOW, ASK),
        ("ls ${x}", ASK, ASK),
        ("ls ${x@P}", ALLOW, DENY),  # a prompt expansion runs what x holds: any command
        ("echo $[x]", ALLOW, DENY),  # arithmetic may run anything: the rm rule could match
        ("ls $(date)", ASK, ASK),
        ("FOO=1 ls", ASK, ASK),
        ("f() { ls; }; f", ALLOW, ASK),
        ("exec ls", ASK, ASK),
        ("/usr/bin/ls", ASK, ASK),  # a path is not the name an allow rule trusts
        ("./ls", ASK, ASK),
        # A deny rule matches its command whatever names it.
        ("c=rm; $c x", ALLOW, DENY),
        ("/bin/rm x", ALLOW, DENY),
        ("../../usr/bin/rm x", ALLOW, DENY),
        ("command rm x", ALLOW, DENY),
        ("env rm x", ALLOW, DENY),
        ("exec rm x", ALLOW, DENY),
        ("nice rm x", ALLOW, DENY),
        ("timeout 5 rm x", ALLOW, DENY),
        ("echo x | xargs rm", ALLOW, DENY),
        ("sudo rm x", ALLOW, DENY),
        ("busybox rm x", ALLOW, DENY),
        ("sh -c 'rm x'", ALLOW, DENY),
        ('bash -c "rm x"', ALLOW, DENY),
        ("find . -exec rm {} \\;", ALLOW, DENY),
        ("ls $(rm x)", ALLOW, DENY),
        ("eval ls", ALLOW, DENY),  # it may run anything
        # A longer rule the command matches overrides a shorter one that could match.
        ("git status $x", ALLOW, ASK),  # known git status, then at least asked
        ("/usr/bin/git status", ALLOW, ASK),  # the git rule, by name; the allow, never
    ],
)
def test_the_decision_is_the_strictest_of_every_command_the_line_may_run(
    line: str, grant: Decision, decision: Decision
) -> None:
    assert decide_command(RULES, grant, line).decision is decision


def test_the_decision_says_which_rule_and_how_the_line_reaches_it() -> None:
    judged = decide_command(RULES, ALLOW, "/bin/rm -rf x")
    assert judged.rule == "the rule for 'rm', which the line may run (as /bin/rm -rf x)"
    assert decide_command(RULES, ALLOW, "env rm x").rule == "the rule for 'rm'"
    anything = decide_command(RULES, ALLOW, "ls ${x@P}").rule
    assert anything == ("the rule for 'rm', which the line may run (it may run any command: an "
                        "expansion that evaluates what a variable holds)")  # fmt: skip
    unknown = decide_command(RULES, ALLOW, "ls ${x}")
    assert (unknown.rule, unknown.why) == (
        None, "what it runs cannot all be known: a parameter expansion")  # fmt: skip


UNREADABLE = st.sampled_from(["echo 'open", "ls )", "{r,}m x", "x" * (MOST_CHARS + 1),
                              "eval x", "$c", "sh"])  # fmt: skip
WORDS = st.lists(st.sampled_from(["rm", "git", "ls", "push"]), min_size=1, max_size=2)
RULE = st.builds(PrefixRule, WORDS.map(tuple), st.sampled_from(list(Decision)))


@given(line=UNREADABLE, rules=st.lists(RULE, max_size=4), grant=st.sampled_from(list(Decision)))
def test_a_line_that_may_run_anything_takes_the_strictest_of_the_grant_and_every_rule(
    line: str, rules: list[PrefixRule], grant: Decision
) -> None:
    # Today's floor: and at least ask, as nothing it runs can be known.
    order = [ALLOW, ASK, DENY]
    floor = max([grant, ASK, *(r.decision for r in rules)], key=order.index)
    assert decide_command(rules, grant, line).decision is floor


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
    # Asked only because it cannot be known: the owner's session answer lifts that.
    unknown = {"command": "ls $HOME"}
    asked = decide(policy, workspace, "shell", unknown)
    assert asked.decision is ASK
    assert "what it runs cannot all be known: a parameter expansion" in asked.reason
    assert decide(policy, workspace, "shell", unknown, {"shell"}).decision is ALLOW
    assert decide(policy, workspace, "shell", {"command": "nice git push"}, {"shell"}).decision \
        is ASK  # fmt: skip


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


@pytest.mark.parametrize(
    ("line", "decision"),
    [
        ("ls " + "{" * 65000, ALLOW),  # once quadratic in its braces
        ("sh -c " + "sh\\ -c\\ " * 8000 + "{" * 1000, DENY),
        ("echo " + "${a:-" * 8000 + "}" * 8000, ASK),
        ("echo " + "$(" * 10000 + ")" * 10000, DENY),
        ("{ " * 20000 + "ls" + "; }" * 20000, DENY),
        ("ls;" * 20000, ALLOW),
        ("nice " * 13000, DENY),
        ("sh -c 'sh -c \"ls\"';" * 3000, ALLOW),
        ("echo ${x:-" + "a" * 60000 + "}", ASK),
    ],
    ids=["braces", "nested-texts", "nested-defaults", "nested-substitutions", "nested-groups",
         "many-commands", "wrappers", "many-texts", "long-default"],
)  # fmt: skip
def test_a_hostile_line_of_any_shape_is_judged(line: str, decision: Decision) -> None:
    # Each within a second or so on a small machine (`make bench`); here: judged at all, and
    # as it must be.
    assert decide_command(RULES, ALLOW, line).decision is decision
