"""`shell`'s rules against bash itself: lines made of the ways around a rule (quotes, paths,
wrappers, variables, texts, substitutions) are run by the real bash, with each command the rules
know of replaced by one that writes its name down, and what bash ran is compared with what the
reading said the line may run. A deny rule for a command bash ran must deny the line; a line
the rules allow must have run only what they allow."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from boxmaker.brokerd import Decision
from boxmaker.brokerd.policy.command_line import read_line
from boxmaker.brokerd.policy.commands import PrefixRule, decide_command

NAMES = ("rm", "git", "ls", "cat")
ALLOWED = ("ls", "cat")  # the allow rules of the second check

SPELLED = st.sampled_from([
    "rm", "git", "ls", "cat", "r\\m", "'r'm", '"rm"', "r''m", "\\rm", "$c", "${c}", "r*",
    "[r]m", "$'\\x72m'", '"$c"', "$(echo rm)", "`echo git`", "{r,}m", "rm#", "~rm",
])  # fmt: skip
ARGUMENT = st.sampled_from([
    "x", "-rf", "push", "status", "$c", "*", "'a b'", "#", "a#b", "$(rm)", "`git`", "{}", "\\;",
    ";", "--", "-c", "'rm x'", '"git push"', "'ls; rm'", "$((1))", "$[1]", "~", "-n", "1",
    "\\", "'$(rm)'", "-exec", "rm", "==", "=~", ">/dev/null", "2>&1", "<<<x", "\\\n", "\r",
    "--s", "--ch", "-Z",
])  # fmt: skip
WRAPPER = st.sampled_from(
    [
        "",
        "",
        "",
        "command",
        "command -v",
        "env",
        "env A=1",
        "env -u A",
        "exec",
        "nice",
        "nice -n 1",
        "timeout 5",
        "timeout -s KILL 5",
        "xargs",
        "xargs -I{}",
        "xargs -0",
        "sh -c",
        "bash -c",
        "bash -xc",
        "find . -maxdepth 0 -exec",
        "builtin",
        "eval",
        "time",
        "nohup",
        "stdbuf -o0",
        "c=git",
        "A=1",
        "!",
        "jobs -x",
        "0</dev/null",
        "coproc",
    ]
)  # none that searches a PATH of its own, as `command -p` and `env -i` do
OPERATOR = st.sampled_from([";", "&&", "||", "|", "\n"])


@st.composite
def lines(draw: st.DrawFn) -> str:
    commands = []
    for _ in range(draw(st.integers(1, 3))):
        words = [draw(WRAPPER), draw(SPELLED), *draw(st.lists(ARGUMENT, max_size=3))]
        commands.append(" ".join(w for w in words if w))
    line = commands[0]
    for command in commands[1:]:
        line += f" {draw(OPERATOR)} {command}"
    shape = draw(st.sampled_from(["{}", "{}", "c=rm; {}", "({})", "{{ {}; }}", "echo $({})",
                                  "if true; then {}; fi", "f() {{ {}; }}; f",
                                  "cat <<E\n$({})\nE", "for i in 1; do {}; done"]))  # fmt: skip
    return shape.format(line)


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`bin/` of commands that write their names to `log`, and `work/`, where bash runs."""
    base = tmp_path_factory.mktemp("bash")
    (base / "bin").mkdir()
    for name in NAMES:
        script = base / "bin" / name
        script.write_text(f'#!/bin/sh\necho {name} >> "$LOG"\n')
        script.chmod(0o755)
    (base / "work").mkdir()
    return base


def ran(stage: Path, line: str) -> set[str]:
    """The names of the commands bash ran for `line`, in `work/` holding files a glob may find
    (`rm`, `push`)."""
    log = stage / "log"
    log.write_text("")
    for name in ("rm", "push"):
        (stage / "work" / name).write_text("")
    environ = {"PATH": f"{stage / 'bin'}:/usr/bin:/bin", "LOG": str(log), "HOME": str(stage)}
    # Read to the end of both pipes: a process substitution's command (`<(rm)`) outlives bash,
    # and holds them open until it is done, so its line is in the log when this returns.
    subprocess.run(["/bin/bash", "-c", line], env=environ, cwd=stage / "work", timeout=30,
                   stdin=subprocess.DEVNULL, capture_output=True, check=False)  # fmt: skip
    return set(log.read_text().split())


@settings(max_examples=max(300, settings.default.max_examples),
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(line=lines())
def test_what_bash_runs_is_what_the_rules_see(stage: Path, line: str) -> None:
    names = ran(stage, line)
    reading = read_line(line)
    event("bash ran a command" if names else "bash ran none")
    event("read whole" if reading.unknown is None else "read: some unknown")
    for name in names:
        judged = decide_command((PrefixRule((name,), Decision.DENY),), Decision.ALLOW, line)
        assert judged.decision is Decision.DENY, (name, line)
    allowed = tuple(PrefixRule((name,), Decision.ALLOW) for name in ALLOWED)
    if decide_command(allowed, Decision.ASK, line).decision is Decision.ALLOW:
        assert names <= set(ALLOWED), line
    if reading.unknown is None:  # known: each command bash ran is one the reading found
        found = {words[0].rsplit("/", 1)[-1] for words in reading.forms if words[0]}
        assert names <= found, (line, reading.forms)


@pytest.mark.parametrize(
    "line",
    ["c=rm; $c x", "BIN/rm x", "command rm x", "env rm x", "exec rm x", "nice rm x",
     "timeout 5 rm x", "xargs rm", "sh -c 'rm x'", "bash -c 'rm x'",
     "find . -maxdepth 0 -exec rm {} \\;", "r\\m x", "'r'm x", "[r]m x", "$'\\x72m' x",
     "cat <<E\n$(rm)\nE", "x='$(rm)'; ls ${x@P}", "echo $[$(rm)]", "x='a[$(rm)]'; echo $((x))",
     "x='a[$(rm)]'; echo ${!x}", "x='a[$(rm)]'; y=abc; echo ${y:x}",
     "declare -n r='a[$(rm)]'; echo $r", "read 'a[$(rm)]' <<< 1", "PS4='$(rm)'; set -x; ls"],
)  # fmt: skip
def test_each_way_around_a_deny_rule_runs_the_command_and_is_denied(stage: Path, line: str) -> None:
    line = line.replace("BIN/", f"{stage}/bin/")
    assert "rm" in ran(stage, line)  # the way around works on bash as it is
    judged = decide_command((PrefixRule(("rm",), Decision.DENY),), Decision.ALLOW, line)
    assert judged.decision is Decision.DENY


# Lines an attacker found running `rm` past an earlier reading: where tree-sitter-bash reads a
# line otherwise than bash (continuations, carriage returns, heredocs, patterns, reserved
# words, redirections), options a wrapper takes abbreviated, and variables set by builtins.
FOUND = [
    "ls\n\\rm -rf x", "ls\n\\\nrm", "ls\n\\\r\nrm", "ls; r\\\nm", "e\\\nval rm",
    "c\\\nommand rm", 'echo "$\\\n(rm)"', "ls\r#;rm", "ls \x0b#;rm", "ls \x0c#;rm",
    "ls \\\r\nrm", "ls >\r\nrm", "ls ==\nrm", "ls =~\nrm", "cat <<E\n`rm`\nE",
    "cat <<-E\n\t$(rm)\nE", "cat <<E\n\r$(rm)\nE", "cat <<E'F'\nEF\nrm\nE'F'\n",
    "cat <<$'E'\nE\nrm\n$'E'\n", "[[ x =~ `rm` ]]; ls", "[[ x =~ <(rm) ]]; ls",
    "[[ x == @(`rm`) ]]; ls", "[[ x == *<(rm) ]]; ls", "[[ x == [`rm`] ]]; ls",
    "case x in [`rm`]) ;; esac; ls", "ls {a['$(rm)']}>/dev/null", "0</dev/null rm", "! ! rm",
    "time x=1 rm", "time { rm; }", "time >/dev/null rm", "coproc x=1 rm", "jobs -x rm",
    "env --ch /tmp rm", "env --un A rm", "env --s 'rm x'", "nice --a 5 rm",
    "timeout --k 1 5 rm", "timeout --s KILL 5 rm", "stdbuf --o 0 rm", "ionice --class 3 rm",
    "echo x | xargs --max-lines rm", "echo x | xargs --del , rm", "echo x | xargs --max-a 1 rm",
    "echo x | xargs --pro V rm", "printf -v PS4 '$(rm)'; set -x; true",
    "read PS4 <<< '$(rm)'; set -x; true", "printf -v'a[$(rm)]' 1",
    "printf -v'BASH_CMDS[ls]' BIN/rm; ls",
    "shopt -s expand_aliases; printf -v'BASH_ALIASES[ls]' rm\nls",
    "builtin declare 'a[$(rm)]=1'", "\\declare 'a[$(rm)]=1'",
    "\\export 'BASH_ENV=$(rm)'; bash -c true", "set -a; read BASH_ENV <<< '$(rm)'; bash -c true",
    "read HOME <<< BIN/rm; ~", "env 'BASH_ENV=$(rm)' bash -c true",
    "env 'BASH_FUNC_ls%%=() { rm; }' bash -c ls", "command declare -n r='a[$(rm)]'; echo $r",
    "declare '-n' r='a[$(rm)]'; echo $r", "declare 'PS4=$(rm)'; set -x; true",
    "BASH_CMDS=([ls]=BIN/rm); ls", "HOME=BIN/rm; ~", "x='b[$(rm)]'; a=([x]=1)",
    "echo ${x:-`rm`}", "echo \"${x:-'$(rm)'}\"", "echo ${x:-<(rm)}", "echo `echo \\`rm\\``",
    "cat <<E\n$\\\n(rm)\nE", "ls=$ rm", "nice >/dev/null rm",
]  # fmt: skip


@pytest.mark.parametrize("line", FOUND)
def test_each_way_found_around_the_rules_runs_rm_and_is_denied(stage: Path, line: str) -> None:
    line = line.replace("BIN/", f"{stage}/bin/")
    assert "rm" in ran(stage, line)  # it works on bash as it is
    judged = decide_command((PrefixRule(("rm",), Decision.DENY),), Decision.ALLOW, line)
    assert judged.decision is Decision.DENY
    allowed = tuple(PrefixRule((name,), Decision.ALLOW) for name in ALLOWED)
    assert decide_command(allowed, Decision.ASK, line).decision is not Decision.ALLOW


def test_bash_is_the_one_the_tests_mean() -> None:
    assert os.access("/bin/bash", os.X_OK)
