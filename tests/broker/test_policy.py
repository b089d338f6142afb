"""policy.toml: one test per error a person can make, every rule of `decide`, the examples and
the protected folders checked at load, and an `always` answer written with the file kept."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.brokerd.files.roots import Root
from boxmaker.brokerd.policy.decide import check_examples
from boxmaker.brokerd.policy.load import load_policy
from boxmaker.brokerd.policy.rules import (
    SHIPPED_POLICY,
    Decision,
    Example,
    Grant,
    Policy,
    PolicyError,
    Verdict,
    decide,
    decide_mcp,
    parse_policy,
)
from boxmaker.brokerd.policy.write import write_always
from boxmaker.proto import DataClass

POLICY = Path("/etc/boxmaker/policy.toml")
WORKSPACE = PurePosixPath("/home/me/workspace")
ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY


def folders(**links: str) -> Callable[[str], Path]:
    """A fake `resolve`: each key is a folder that resolves to its value; nothing else exists."""

    def resolve(path: str) -> Path:
        if path not in links:
            raise ValueError("no such file or directory")
        return Path(links[path])

    return resolve


def parse(text: str, *existing: str) -> Policy:
    return parse_policy(text, POLICY, resolve=folders(**{p: p for p in existing}))


def refusal(text: str, *existing: str) -> str:
    with pytest.raises(PolicyError) as caught:
        parse(text, *existing)
    return str(caught.value)


# Parsing.


def test_an_empty_policy_asks_for_every_tool_and_reaches_the_workspace_only() -> None:
    policy = parse("")
    assert policy == Policy(POLICY, {}, (), DataClass.PRIVATE, ())
    assert policy.grant("write_file") == Grant(ASK, "default (no grant: ask)")
    assert policy.workspace_root(WORKSPACE) == Root(
        "workspace", WORKSPACE, read=True, write=True, data_class=DataClass.PRIVATE
    )


def test_the_format_as_documented() -> None:
    policy = parse(
        '[grants.read_file]\ndecision = "allow"\n[grants.write_file]\ndecision = "deny"\n'
        '[roots.notes]\npath = "/home/me/notes"\nread = true\nwrite = false\nclass = "secret"\n'
        '[roots.drop]\npath = "/srv/drop"\n'
        '[workspace]\nclass = "public"\n'
        '[[examples]]\ntool = "read_file"\narguments = { path = "notes.md" }\ndecision = "allow"\n'
        '[[examples]]\ntool = "clock"\ndecision = "ask"\n',
        "/home/me/notes",
        "/srv/drop",
    )
    assert policy.grants == {
        "read_file": Grant(ALLOW, "policy.toml [grants.read_file]"),
        "write_file": Grant(DENY, "policy.toml [grants.write_file]"),
    }
    assert policy.roots == (
        Root("notes", PurePosixPath("/home/me/notes"), True, False, DataClass.SECRET),
        Root("drop", PurePosixPath("/srv/drop"), True, False, DataClass.PRIVATE),  # defaults
    )
    assert policy.workspace_class is DataClass.PUBLIC
    assert policy.examples == (
        Example("read_file", {"path": "notes.md"}, ALLOW),
        Example("clock", {}, ASK),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grants = 3\n", "expected an object @ $.grants"),
        ("[grant.read_file]\n", "unknown field @ $.grant; did you mean 'grants'?"),
        ('[shell]\nprefixes = ["git"]\n', "unknown field @ $.shell"),
        ('[grants]\nread_file = "allow"\n', "expected an object @ $.grants.read_file"),
        ("[grants.read_file]\n", "missing field @ $.grants.read_file.decision"),
        (
            '[grants.read_file]\ndecision = "yes"\n',
            "expected one of 'allow', 'ask', 'deny' @ $.grants.read_file.decision",
        ),
        (
            "[grants.read_file]\ndecision = true\n",
            "expected one of 'allow', 'ask', 'deny' @ $.grants.read_file.decision",
        ),
        (
            '[grants."mcp.fetch"]\ndecision = "Allow"\n',
            "expected one of 'allow', 'ask', 'deny' @ $.grants.\"mcp.fetch\".decision",
        ),
        (
            '[grants.read_file]\ndecison = "allow"\n',
            "unknown field @ $.grants.read_file.decison; did you mean 'decision'?",
        ),
        (
            '[grants.call_tool]\ndecision = "allow"\n',
            "call_tool takes no grant: the grant of the tool it runs applies @ $.grants.call_tool",
        ),
        (
            '[grants.find_tool]\ndecision = "deny"\n',
            "find_tool takes no grant: it only searches the registry @ $.grants.find_tool",
        ),
        ("roots = []\n", "expected an object @ $.roots"),
        ("[roots.notes]\nread = true\n", "missing field @ $.roots.notes.path"),
        ("[roots.notes]\npath = 5\n", "expected str @ $.roots.notes.path"),
        (
            '[roots.notes]\npath = "notes"\n',
            'expected an absolute path, got "notes" @ $.roots.notes.path',
        ),
        (
            '[roots.notes]\npath = "~/notes"\n',
            'expected an absolute path, got "~/notes" @ $.roots.notes.path',
        ),
        (
            '[roots.notes]\npath = "/home/me/gone"\n',
            'expected an existing folder, got "/home/me/gone" (no such file or directory) '
            "@ $.roots.notes.path",
        ),
        (
            '[roots.notes]\npath = "/srv/notes"\nread = "yes"\n',
            "expected bool @ $.roots.notes.read",
        ),
        (
            '[roots.notes]\npath = "/srv/notes"\nwrite = 1\n',
            "expected bool @ $.roots.notes.write",
        ),
        (
            '[roots.notes]\npath = "/srv/notes"\nclass = "top"\n',
            "expected one of 'public', 'private', 'secret' @ $.roots.notes.class",
        ),
        (
            '[roots.notes]\npath = "/srv/notes"\nmode = "rw"\n',
            "unknown field @ $.roots.notes.mode",
        ),
        (
            '[roots.workspace]\npath = "/srv/notes"\n',
            '"workspace" names the workspace itself: choose another @ $.roots.workspace',
        ),
        (
            '[workspace]\nclass = "open"\n',
            "expected one of 'public', 'private', 'secret' @ $.workspace.class",
        ),
        ('[workspace]\npath = "/srv"\n', "unknown field @ $.workspace.path"),
        ("examples = 3\n", "expected an array @ $.examples"),
        (
            '[examples]\ntool = "clock"\n',
            "expected an array @ $.examples",
        ),
        (
            '[[examples]]\ntool = "clock"\ndecision = "ask"\n[[examples]]\ntool = "clock"\n',
            "missing field @ $.examples[1].decision",
        ),
        ('[[examples]]\ndecision = "ask"\n', "missing field @ $.examples[0].tool"),
        (
            '[[examples]]\ntool = "clock"\narguments = "now"\ndecision = "ask"\n',
            "expected an object @ $.examples[0].arguments",
        ),
        (
            '[[examples]]\ntool = "clock"\ndecision = "ask"\nreason = "x"\n',
            "unknown field @ $.examples[0].reason",
        ),
    ],
)
def test_each_mistake_is_refused_naming_the_file_the_key_and_what_was_expected(
    text: str, message: str
) -> None:
    assert refusal(text, "/srv/notes") == f"{POLICY}: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[roots.notes]\npath = "/srv/notes"\nclas = "secret"\n',
            "unknown field @ $.roots.notes.clas; did you mean 'class'?",
        ),
        (
            "[mcp.git]\ntrust_hint = true\n",
            "unknown field @ $.mcp.git.trust_hint; did you mean 'trust_hints'?",
        ),
        (
            '[[examples]]\ntool = "clock"\ndecision = "ask"\ntaint = true\n',
            "unknown field @ $.examples[0].taint; did you mean 'tainted'?",
        ),
        (
            "[sandbox]\nunconfine = true\n",
            "unknown field @ $.sandbox.unconfine; did you mean 'unconfined'?",
        ),
        (
            '[grants.shell]\ndecision = "allow"\nprefix = []\n',
            "unknown field @ $.grants.shell.prefix; did you mean 'prefixes'?",
        ),
        # Only shell's grant has rules: another tool's is not pointed at them.
        (
            '[grants.echo]\ndecision = "allow"\nprefix = []\n',
            "unknown field @ $.grants.echo.prefix",
        ),
    ],
)
def test_an_unknown_key_near_a_known_one_says_which_as_config_toml_does(
    text: str, message: str
) -> None:
    assert refusal(text, "/srv/notes") == f"{POLICY}: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[grants.shell]\ndecision = "allow"\n'
            '[[grants.shell.prefixes]]\nprefix = ["git", 1]\ndecision = "ask"\n',
            "expected str @ $.grants.shell.prefixes[0].prefix[1]",
        ),
        ('[mcp."my.server"]\negress = "yes"\n', 'expected bool @ $.mcp."my.server".egress'),
        (
            '[[examples]]\ntool = "clock"\ndecision = "ask"\n'
            '[[examples]]\ntool = 3\ndecision = "ask"\n',
            "expected str @ $.examples[1].tool",
        ),
    ],
)
def test_a_wrong_type_says_what_was_expected_at_its_key_as_config_toml_does(
    text: str, message: str
) -> None:
    assert refusal(text) == f"{POLICY}: {message}"


def test_every_mistake_in_the_tables_is_said_at_once() -> None:
    text = '[roots.notes]\npath = 5\n[sandbox]\nunconfined = 1\n[workspace]\nclass = "open"\n'
    assert refusal(text) == (
        f"{POLICY}: expected str @ $.roots.notes.path; expected one of 'public', 'private', "
        "'secret' @ $.workspace.class; expected bool @ $.sandbox.unconfined"
    )
    grants = '[grants.read_file]\ndecision = "yes"\n[grants.echo]\ndecision = "ask"\negress = 1\n'
    assert refusal(grants) == (
        f"{POLICY}: expected one of 'allow', 'ask', 'deny' @ $.grants.read_file.decision; "
        "expected bool @ $.grants.echo.egress"
    )


def test_text_that_is_not_toml_is_refused() -> None:
    assert refusal("[grants.read_file\n").startswith(f"{POLICY}: not valid TOML: ")


def test_two_roots_on_one_folder_are_refused() -> None:
    resolve = folders(**{"/srv/notes": "/srv/notes", "/home/me/notes": "/srv/notes"})
    text = '[roots.a]\npath = "/srv/notes"\n[roots.b]\npath = "/home/me/notes"\n'
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, POLICY, resolve=resolve)
    assert str(caught.value) == f"{POLICY}: /srv/notes is root a already @ $.roots.b.path"


def test_a_root_is_resolved_on_disk_with_its_links_followed(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "notes")
    (tmp_path / "file").write_text("")
    policy = parse_policy(f'[roots.notes]\npath = "{tmp_path}/link"\n', POLICY)
    assert policy.roots[0].path == PurePosixPath(tmp_path.resolve() / "notes")
    for name, why in [("gone", "No such file or directory"), ("file", "not a folder")]:
        with pytest.raises(PolicyError) as caught:
            parse_policy(f'[roots.notes]\npath = "{tmp_path}/{name}"\n', POLICY)
        assert str(caught.value) == (
            f'{POLICY}: expected an existing folder, got "{tmp_path}/{name}" ({why}) '
            "@ $.roots.notes.path"
        )


# decide().

ROOTS = (
    '[roots.notes]\npath = "/home/me/notes"\n'  # read only
    '[roots.drop]\npath = "/srv/drop"\nread = false\nwrite = true\n'
    '[roots.sealed]\npath = "/srv/sealed"\nread = false\n'
    '[roots.srv]\npath = "/srv"\n'
    '[roots.inbox]\npath = "/srv/mail/inbox"\nwrite = true\n'
)
FOLDERS = ("/home/me/notes", "/srv/drop", "/srv/sealed", "/srv", "/srv/mail/inbox")


def with_grants(**grants: str) -> Policy:
    text = "".join(f'[grants.{tool}]\ndecision = "{word}"\n' for tool, word in grants.items())
    return parse(text + ROOTS, *FOLDERS)


def call(policy: Policy, tool: str, session: tuple[str, ...] = (), **arguments: Any) -> Verdict:
    return decide(policy, WORKSPACE, tool, arguments, session)


FILES = with_grants(read_file="allow", write_file="allow", list_dir="allow", edit_file="ask")


def test_a_path_in_the_workspace_gets_the_tool_s_grant_and_where_it_lands() -> None:
    for path in ("notes/todo.md", "./notes//todo.md", "/home/me/workspace/notes/todo.md"):
        verdict = call(FILES, "write_file", path=path, content="")
        assert verdict == Verdict(
            ALLOW,
            "the policy allows write_file (policy.toml [grants.write_file])",
            "policy.toml [grants.write_file]",
            verdict.located,
        )
        assert verdict.located is not None
        assert (verdict.located.root.name, verdict.located.parts) == (
            "workspace",
            ("notes", "todo.md"),
        )


def test_a_root_granted_read_is_read_but_not_written() -> None:
    read = call(FILES, "read_file", path="/home/me/notes/a.md")
    assert read.decision is ALLOW
    assert read.located is not None
    assert (read.located.root.name, read.located.shown) == ("notes", "/home/me/notes/a.md")
    for tool in ("write_file", "edit_file"):
        verdict = call(FILES, tool, path="/home/me/notes/a.md")
        assert (verdict.decision, verdict.reason) == (DENY, "notes is granted read, not write")
        assert verdict.source == "policy.toml [roots.notes]"


def test_a_root_granted_write_is_written_but_not_read() -> None:
    assert call(FILES, "write_file", path="/srv/drop/x").decision is ALLOW
    for tool in ("read_file", "list_dir", "search_files"):
        verdict = call(FILES, tool, path="/srv/drop")
        assert (verdict.decision, verdict.reason) == (DENY, "drop is granted write, not read")
    sealed = call(FILES, "read_file", path="/srv/sealed/x")
    assert (sealed.decision, sealed.reason) == (DENY, "sealed is granted neither read nor write")


def test_a_path_outside_every_root_is_denied_whatever_the_grant() -> None:
    verdict = call(FILES, "read_file", path="/etc/passwd")
    assert verdict == Verdict(
        DENY,
        "/etc/passwd is outside the workspace (/home/me/workspace) and every root the policy "
        "grants",
        "policy.toml [roots]",
    )
    assert call(FILES, "read_file", path="/home/me/workspace2/x").decision is DENY


def test_a_climb_is_denied_even_when_it_would_land_inside() -> None:
    for path in ("../x", "notes/../todo.md", "/home/me/notes/../workspace/x"):
        verdict = call(FILES, "read_file", path=path)
        assert (verdict.decision, verdict.reason) == (
            DENY,
            f"{path!r} holds '..': write the path without it",
        )


def test_the_deepest_root_that_holds_a_path_decides() -> None:
    inbox = call(FILES, "write_file", path="/srv/mail/inbox/1.eml")
    assert inbox.decision is ALLOW
    assert inbox.located is not None
    assert inbox.located.root.name == "inbox"
    outside_inbox = call(FILES, "write_file", path="/srv/mail/outbox/1.eml")
    assert (outside_inbox.decision, outside_inbox.reason) == (
        DENY,
        "srv is granted read, not write",
    )


def test_search_files_without_a_path_searches_the_workspace() -> None:
    verdict = call(with_grants(search_files="allow"), "search_files", pattern="TODO")
    assert verdict.decision is ALLOW
    assert verdict.located is not None
    assert (verdict.located.root.name, verdict.located.parts) == ("workspace", ())


def test_a_file_tool_without_a_string_path_is_denied() -> None:
    for arguments in ({}, {"path": 5}, {"path": None}):
        verdict = decide(FILES, WORKSPACE, "read_file", arguments)
        assert verdict == Verdict(DENY, "read_file needs a path, as a string", "arguments")


def test_a_tool_with_no_grant_asks() -> None:
    verdict = call(FILES, "fetch_url", url="https://example.com")
    assert verdict == Verdict(
        ASK,
        "fetch_url needs the owner's approval (default (no grant: ask))",
        "default (no grant: ask)",
    )
    assert call(FILES, "search_files", path="notes").decision is ASK
    assert call(with_grants(clock="deny"), "clock").reason == (
        "the policy denies clock (policy.toml [grants.clock])"
    )


def test_a_session_grant_turns_ask_into_allow_but_never_deny() -> None:
    policy = with_grants(write_file="deny", edit_file="ask")
    edit = call(policy, "edit_file", ("edit_file",), path="a.md", old="x", new="y")
    assert (edit.decision, edit.source) == (ALLOW, "session")
    asked = call(policy, "fetch_url", ("fetch_url",))
    assert asked == Verdict(ALLOW, "the policy allows fetch_url (session)", "session")
    denied = call(policy, "write_file", ("write_file",), path="a.md", content="")
    assert (denied.decision, denied.source) == (DENY, "policy.toml [grants.write_file]")
    assert call(policy, "edit_file", ("fetch_url",), path="a.md").decision is ASK  # another tool


def test_a_session_grant_does_not_reach_outside_the_roots() -> None:
    policy = with_grants(write_file="ask")
    for path in ("/etc/profile", "/home/me/notes/a.md", "../a.md"):
        assert call(policy, "write_file", ("write_file",), path=path).decision is DENY


def test_call_tool_is_never_decided_on_its_own_grant() -> None:
    verdict = call(parse(""), "call_tool", ("call_tool",), name="write_file")
    assert verdict.decision is DENY
    assert verdict.source == "core: the grant of the tool it runs applies"
    assert call(parse(""), "find_tool", query="mail").decision is ALLOW


# Loading: the examples and the protected folders.


def home_layout(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A home with its sessions, memory and workspace, and /etc with the config and the
    policy; the protected places as brokerd passes them."""
    home = tmp_path / "home"
    for folder in ("sessions", "memory", "workspace"):
        (home / folder).mkdir(parents=True)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.toml").write_text("")
    policy = etc / "policy.toml"
    return policy, [home, home / "sessions", etc / "config.toml", policy, home / "memory"]


def workspace_of(tmp_path: Path) -> PurePosixPath:
    return PurePosixPath(tmp_path / "home" / "workspace")


def test_a_failing_example_refuses_the_policy(tmp_path: Path) -> None:
    policy_file, protected = home_layout(tmp_path)
    (tmp_path / "system").mkdir()
    (tmp_path / "system" / "passwd").write_text("")
    policy_file.write_text(
        '[grants.read_file]\ndecision = "allow"\n'
        f'[roots.system]\npath = "{tmp_path}/system"\n'  # too wide a root: the example says so
        '[[examples]]\ntool = "read_file"\narguments = { path = "notes.md" }\ndecision = "allow"\n'
        f'[[examples]]\ntool = "read_file"\narguments = {{ path = "{tmp_path}/system/passwd" }}\n'
        'decision = "deny"\n'
    )
    with pytest.raises(PolicyError) as caught:
        load_policy(policy_file, workspace_of(tmp_path), protected)
    assert str(caught.value) == (
        f'{policy_file}: example 2 (read_file {{"path": "{tmp_path}/system/passwd"}}) expects '
        "deny, the policy gives allow: the policy allows read_file (policy.toml "
        "[grants.read_file])"
    )


def test_examples_that_hold_let_the_policy_load(tmp_path: Path) -> None:
    policy_file, protected = home_layout(tmp_path)
    policy_file.write_text(
        '[grants.read_file]\ndecision = "allow"\n'
        '[[examples]]\ntool = "read_file"\narguments = { path = "notes.md" }\ndecision = "allow"\n'
        '[[examples]]\ntool = "read_file"\narguments = { path = "/etc/passwd" }\n'
        'decision = "deny"\n[[examples]]\ntool = "shell"\ndecision = "ask"\n'
    )
    policy = load_policy(policy_file, workspace_of(tmp_path), protected)
    assert len(policy.examples) == 3
    check_examples(policy, workspace_of(tmp_path))


def test_a_failing_example_is_named_by_check_examples() -> None:
    policy = parse('[[examples]]\ntool = "clock"\ndecision = "allow"\n')
    with pytest.raises(PolicyError) as caught:
        check_examples(policy, WORKSPACE)
    assert str(caught.value) == (
        f"{POLICY}: example 1 (clock {{}}) expects allow, the policy gives ask: clock needs "
        "the owner's approval (default (no grant: ask))"
    )


@pytest.mark.parametrize(
    ("root", "held"),
    [
        ("home", "home"),  # the home itself
        ("home/sessions", "home/sessions"),
        ("home/memory", "home/memory"),
        ("etc", "etc/config.toml"),  # the config's folder
        ("", "home"),  # a root above them all
    ],
)
def test_a_root_that_holds_a_protected_place_is_refused(
    tmp_path: Path, root: str, held: str
) -> None:
    policy_file, protected = home_layout(tmp_path)
    policy_file.write_text(f'[roots.r]\npath = "{tmp_path / root}"\n')
    with pytest.raises(PolicyError) as caught:
        load_policy(policy_file, workspace_of(tmp_path), protected)
    assert str(caught.value) == (
        f"{policy_file}: root r ({(tmp_path / root).resolve()}) holds {tmp_path / held}: an "
        "agent that can edit its own grants has none @ $.roots.r.path"
    )


def test_the_policy_file_itself_is_protected_even_when_not_listed(tmp_path: Path) -> None:
    policy_file, _ = home_layout(tmp_path)
    policy_file.write_text(f'[roots.etc]\npath = "{tmp_path}/etc"\nwrite = true\n')
    with pytest.raises(PolicyError, match=r"holds .*policy\.toml: an agent that can edit its own"):
        load_policy(policy_file, workspace_of(tmp_path), [])


def test_a_link_does_not_hide_a_protected_place(tmp_path: Path) -> None:
    policy_file, protected = home_layout(tmp_path)
    (tmp_path / "innocent").symlink_to(tmp_path / "home" / "memory")
    policy_file.write_text(f'[roots.notes]\npath = "{tmp_path}/innocent"\n')
    with pytest.raises(PolicyError, match=r"holds .*memory: an agent .* @ \$\.roots\.notes\.path"):
        load_policy(policy_file, workspace_of(tmp_path), protected)
    (tmp_path / "sessions-link").symlink_to(tmp_path / "home" / "sessions")
    policy_file.write_text(f'[roots.home]\npath = "{tmp_path}/home"\n')
    with pytest.raises(PolicyError, match=r"holds .*sessions-link: an agent"):
        load_policy(policy_file, workspace_of(tmp_path), [tmp_path / "sessions-link"])


def test_a_workspace_that_holds_the_home_is_refused(tmp_path: Path) -> None:
    policy_file, protected = home_layout(tmp_path)
    policy_file.write_text("")
    with pytest.raises(PolicyError) as caught:
        load_policy(policy_file, PurePosixPath(tmp_path), protected)
    assert str(caught.value) == (
        f"{policy_file}: the workspace ({tmp_path}) holds {tmp_path / 'home'}: an agent that "
        "can edit its own grants has none"
    )


@pytest.mark.parametrize("inside", ["home/sessions/chat-1", "home/memory/notes", "home/run"])
def test_a_root_inside_a_sealed_place_is_refused(tmp_path: Path, inside: str) -> None:
    # The sessions, the memory and brokerd's own state hold nothing a root may reach, even
    # from below: a root at a session's folder could rewrite its log.
    policy_file, protected = home_layout(tmp_path)
    home = tmp_path / "home"
    sealed = [home / "sessions", home / "memory", home / "run"]
    (tmp_path / inside).mkdir(parents=True)
    policy_file.write_text(f'[roots.r]\npath = "{tmp_path / inside}"\n')
    with pytest.raises(PolicyError) as caught:
        load_policy(policy_file, workspace_of(tmp_path), protected, sealed)
    sealed_one = next(folder for folder in sealed if folder in (tmp_path / inside).parents
                      or folder == tmp_path / inside)  # fmt: skip
    assert str(caught.value) == (
        f"{policy_file}: root r ({tmp_path / inside}) "
        f"{'holds' if sealed_one == tmp_path / inside else 'is inside'} {sealed_one}: an agent "
        "that can edit its own grants has none @ $.roots.r.path"
    )
    load_policy(policy_file, workspace_of(tmp_path), [])  # without the seal it would load


def test_roots_beside_the_protected_places_load(tmp_path: Path) -> None:
    policy_file, protected = home_layout(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "home-notes").mkdir()  # a name that starts like the home's is not inside it
    policy_file.write_text(
        f'[roots.notes]\npath = "{tmp_path}/notes"\n[roots.hn]\npath = "{tmp_path}/home-notes"\n'
    )
    policy = load_policy(policy_file, workspace_of(tmp_path), protected)  # workspace: in home
    assert [root.name for root in policy.roots] == ["notes", "hn"]


def test_a_policy_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(tmp_path / "policy.toml", workspace_of(tmp_path), [])
    assert str(caught.value) == (
        f"{tmp_path}/policy.toml: cannot read the policy: No such file or directory"
    )


# write_always.

ASKING = """\
# The owner's policy.
[grants.read_file]
decision = "allow"   # reading is fine

[grants.write_file]
decision = "ask"  # asked for now

# Notes, read only.
[roots.notes]
path = "{notes}"

[[examples]]
tool = "read_file"
arguments = {{ path = "/etc/passwd" }}
decision = "deny"
"""


def asking(tmp_path: Path, text: str = ASKING, mode: int = 0o640) -> tuple[Path, Policy]:
    policy_file, _ = home_layout(tmp_path)
    (tmp_path / "notes").mkdir()
    policy_file.write_text(text.format(notes=tmp_path / "notes"))
    policy_file.chmod(mode)
    return policy_file, load_policy(policy_file, workspace_of(tmp_path), [])


def test_always_changes_an_existing_decision_and_keeps_every_other_byte(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path)
    before = policy_file.read_text()
    new = write_always(policy, "write_file", workspace_of(tmp_path))
    assert policy_file.read_text() == before.replace(
        'decision = "ask"  # asked', 'decision = "allow"  # asked'
    )
    assert new.grant("write_file") == Grant(ALLOW, "policy.toml [grants.write_file]")
    assert new == load_policy(policy_file, workspace_of(tmp_path), [])


def test_always_adds_a_missing_table_after_the_last_grant(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path)
    before = policy_file.read_text()
    new = write_always(policy, "edit_file", workspace_of(tmp_path))
    added = '\n[grants.edit_file]\ndecision = "allow"\n'
    assert policy_file.read_text() == before.replace(
        "# asked for now\n", "# asked for now\n" + added
    )
    assert new.grant("edit_file").decision is ALLOW
    assert new.grant("write_file").decision is ASK


def test_always_adds_the_first_grant_to_a_policy_without_any(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path, text="# Nothing granted yet.\n[workspace]\n")
    write_always(policy, "clock", workspace_of(tmp_path))
    assert policy_file.read_text() == (
        '# Nothing granted yet.\n[workspace]\n\n[grants.clock]\ndecision = "allow"\n'
    )


def test_always_is_refused_when_an_example_would_break(tmp_path: Path) -> None:
    text = ASKING + '[[examples]]\ntool = "write_file"\narguments = {{ path = "a" }}\n'
    policy_file, policy = asking(tmp_path, text + 'decision = "ask"\n')
    before = policy_file.read_bytes()
    inode = policy_file.stat().st_ino
    with pytest.raises(PolicyError) as caught:
        write_always(policy, "write_file", workspace_of(tmp_path))
    assert str(caught.value) == (
        f'{policy_file}: example 2 (write_file {{"path": "a"}}) expects ask, the policy gives '
        "allow: the policy allows write_file (policy.toml [grants.write_file])"
    )
    assert (policy_file.read_bytes(), policy_file.stat().st_ino) == (before, inode)
    assert sorted(os.listdir(policy_file.parent)) == ["config.toml", "policy.toml"]


def test_always_replaces_the_file_atomically_keeping_its_mode(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path, mode=0o604)
    inode = policy_file.stat().st_ino
    write_always(policy, "clock", workspace_of(tmp_path))
    assert policy_file.stat().st_ino != inode  # a new file renamed over the old one
    assert stat.S_IMODE(policy_file.stat().st_mode) == 0o604
    assert sorted(os.listdir(policy_file.parent)) == ["config.toml", "policy.toml"]  # no temp


def test_always_writes_nothing_when_the_tool_is_already_allowed(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path)
    inode = policy_file.stat().st_ino
    assert write_always(policy, "read_file", workspace_of(tmp_path)) is policy
    assert policy_file.stat().st_ino == inode


def test_always_does_not_lift_a_deny_nor_grant_call_tool(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path, ASKING + '[grants.clock]\ndecision = "deny"\n')
    before = policy_file.read_bytes()
    with pytest.raises(PolicyError) as caught:
        write_always(policy, "clock", workspace_of(tmp_path))
    assert str(caught.value) == (
        f"{policy_file}: 'always' does not lift a deny; edit it @ $.grants.clock.decision"
    )
    with pytest.raises(PolicyError, match="call_tool takes no grant"):
        write_always(policy, "call_tool", workspace_of(tmp_path))
    assert policy_file.read_bytes() == before


def test_always_is_refused_when_the_file_changed_since_it_was_loaded(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path)
    edited = policy_file.read_text().replace("reading is fine", "reading is fine, I said")
    policy_file.write_text(edited)  # a comment: still the same policy
    new = write_always(policy, "clock", workspace_of(tmp_path))
    policy_file.write_text(policy_file.read_text().replace('"allow"   #', '"deny"   #'))
    before = policy_file.read_bytes()
    with pytest.raises(PolicyError) as caught:
        write_always(new, "echo", workspace_of(tmp_path))
    assert str(caught.value) == (f"{policy_file}: changed since it was loaded: load it again first")
    assert policy_file.read_bytes() == before


def test_always_into_an_inline_grants_table(tmp_path: Path) -> None:
    policy_file, policy = asking(tmp_path, 'grants = {{ read_file = {{ decision = "allow" }} }}\n')
    write_always(policy, "clock", workspace_of(tmp_path))
    assert load_policy(policy_file, workspace_of(tmp_path), []).grant("clock").decision is ALLOW


# The shipped policy.


def shipped(tmp_path: Path) -> Policy:
    policy_file, protected = home_layout(tmp_path)
    policy_file.write_text(SHIPPED_POLICY)
    return load_policy(policy_file, workspace_of(tmp_path), protected)


def test_the_shipped_policy_loads_and_is_the_packaged_file(tmp_path: Path) -> None:
    source = Path(__file__).parents[2] / "src" / "boxmaker" / "policy.toml"
    assert source.read_text() == SHIPPED_POLICY
    policy = shipped(tmp_path)
    decisions = {tool: grant.decision for tool, grant in policy.grants.items()}
    assert decisions.pop("schedule") is ASK  # a schedule acts later, without the owner
    assert decisions == dict.fromkeys(
        [
            "read_file",
            "list_dir",
            "search_files",
            "write_file",
            "edit_file",
            "shell",
            "run_cell",
            "clock",
            "remember",
            "forget",
            "recall",
            "list_schedules",
            "cancel_schedule",
            "echo",
        ],
        ALLOW,
    )
    assert policy.roots == ()
    assert policy.workspace_class is DataClass.PRIVATE
    assert {example.decision for example in policy.examples} == {ALLOW, ASK, DENY}


def test_the_shipped_policy_takes_an_always_answer(tmp_path: Path) -> None:
    policy = shipped(tmp_path)
    new = write_always(policy, "fetch_url", workspace_of(tmp_path))
    assert new.grant("fetch_url").decision is ALLOW
    text = policy.path.read_text()
    assert text.replace('[grants.fetch_url]\ndecision = "allow"\n\n', "", 1) == SHIPPED_POLICY


SHIPPED = parse(SHIPPED_POLICY)
FILE_TOOLS = ["read_file", "list_dir", "search_files", "write_file", "edit_file"]
COMPONENT = st.text(st.sampled_from("abc.-_ /"), min_size=1, max_size=6)


@given(st.lists(COMPONENT, max_size=5), st.sampled_from(FILE_TOOLS))
def test_the_shipped_policy_reaches_nothing_outside_the_workspace(
    parts: list[str], tool: str
) -> None:
    path = "/" + "/".join(parts)
    inside = PurePosixPath(path).parts[1:4] == WORKSPACE.parts[1:]
    verdict = decide(SHIPPED, WORKSPACE, tool, {"path": path})
    if not inside or ".." in PurePosixPath(path).parts:
        assert verdict.decision is DENY
    for relative in ("../" + "/".join(parts), "/".join([*parts, "..", "x"])):
        assert decide(SHIPPED, WORKSPACE, tool, {"path": relative}).decision is DENY


# MCP servers' tools (issue 30).


def _mcp_policy(text: str) -> Policy:
    return parse_policy(text, Path("/p/policy.toml"))


def test_an_mcp_grant_names_its_definition_and_a_server_its_trust() -> None:
    policy = _mcp_policy(
        '[grants."git.commit"]\ndecision = "allow"\ndefinition = "ab12"\negress = true\n'
        '[mcp.git]\nclass = "secret"\ntrust_hints = true\n[mcp.web]\negress = true\n'
    )
    grant = policy.grant("git.commit")
    assert (grant.decision, grant.definition, grant.egress) == (Decision.ALLOW, "ab12", True)
    assert policy.server("git").data_class is DataClass.SECRET
    assert policy.server("git").trust_hints
    assert policy.server("other").data_class is DataClass.PRIVATE
    assert policy.egress("git.commit")  # its grant says so
    assert not policy.egress("git.status")
    assert policy.egress("web.fetch")  # its server says so
    assert policy.egress("any.tool", network=True)  # its server has the network
    assert not policy.egress("read_file")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[mcp.git]\nwhatever = 1\n", "unknown field @ $.mcp.git.whatever"),
        ('[mcp.git]\nclass = "open"\n', "@ $.mcp.git.class"),
        (
            '[grants.x]\ndecision = "allow"\ndefinition = 3\n',
            "expected str @ $.grants.x.definition",
        ),
    ],
)
def test_the_new_keys_are_checked(text: str, said: str) -> None:
    with pytest.raises(PolicyError, match=re.escape(said)):
        _mcp_policy(text)


def test_decide_mcp_holds_an_allow_for_its_definition_only() -> None:
    policy = _mcp_policy('[grants."s.t"]\ndecision = "allow"\ndefinition = "d1"\n'
                         '[grants."s.no"]\ndecision = "deny"\n'
                         '[grants."s.bare"]\ndecision = "allow"\n')  # fmt: skip
    assert decide_mcp(policy, "s.t", "d1", False, ()).decision is Decision.ALLOW
    changed = decide_mcp(policy, "s.t", "d2", False, ())
    assert changed.decision is Decision.ASK
    assert "its server changed its definition since it was allowed (d1, now d2)" in changed.note
    bare = decide_mcp(policy, "s.bare", "d1", False, ())
    assert bare.decision is Decision.ASK
    assert "its grant names no definition" in bare.note
    assert decide_mcp(policy, "s.no", "d1", True, ()).decision is Decision.DENY
    assert decide_mcp(policy, "s.new", "d1", True, ()).decision is Decision.ASK  # hints: no
    assert decide_mcp(policy, "s.new", "d1", False, {"s.new@d1"}).decision is Decision.ALLOW
    assert decide_mcp(policy, "s.new", "d2", False, {"s.new@d1"}).decision is Decision.ASK
    # A session answer for this definition holds beside a stale allow; a deny beats it.
    assert decide_mcp(policy, "s.t", "d2", False, {"s.t@d2"}).decision is Decision.ALLOW
    assert decide_mcp(policy, "s.no", "d1", False, {"s.no@d1"}).decision is Decision.DENY


def test_the_owners_ask_is_not_lifted_by_a_servers_hint() -> None:
    policy = _mcp_policy('[grants."s.r"]\ndecision = "ask"\n[mcp.s]\ntrust_hints = true\n')
    assert decide_mcp(policy, "s.r", "d", True, ()).decision is Decision.ASK
    assert decide_mcp(policy, "s.other", "d", True, ()).decision is Decision.ALLOW
    assert decide_mcp(policy, "s.other", "d", False, ()).decision is Decision.ASK


def test_an_always_for_an_mcp_tool_writes_its_definition(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('# mine\n[grants."s.t"]\ndecision = "allow"\ndefinition = "old"\n')
    Path(workspace_of(tmp_path)).mkdir(parents=True)
    policy = load_policy(path, workspace_of(tmp_path), [])
    new = write_always(policy, "s.t", workspace_of(tmp_path), "new")
    assert path.read_text() == '# mine\n[grants."s.t"]\ndecision = "allow"\ndefinition = "new"\n'
    assert new.grant("s.t").definition == "new"
    again = write_always(new, "s.u", workspace_of(tmp_path), "d")
    assert again.grant("s.u").definition == "d"
