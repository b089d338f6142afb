"""brokerd's `Broker`, without its socket: every outcome of a call (allowed, denied, asked and
answered each way), the checks made before anything runs (the tool, its definition's hash, its
arguments against the schema), `find_tool`, the listing, and the calls waiting for the owner
(bounded in number and in time)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.brokerd import SHIPPED_POLICY, Broker, builtin_registry
from boxmaker.brokerd.policy.load import load_policy
from boxmaker.brokerd.policy.rules import Decision, parse_policy
from boxmaker.brokerd.service import MOST_PENDING
from boxmaker.clock import TickingClock
from boxmaker.proto import DataClass
from boxmaker.tools import READ_FILE, definition_hash, failed
from boxmaker.tools.schemas import WRITE_FILE

from ..helpers import make_config

S1, S2 = p.SessionId("s1"), p.SessionId("s2")
ONCE, SESSION, ALWAYS, DENY = p.Answer.ONCE, p.Answer.SESSION, p.Answer.ALWAYS, p.Answer.DENY

# write_file and edit_file ask (one by its table, one by having none), echo is denied, and a
# root beyond the workspace holds secrets. The comments are the owner's: an `always` keeps them.
POLICY = """\
# The owner's policy for these tests.
[grants.read_file]
decision = "allow"

[grants.write_file]
decision = "ask"  # ask me before any write

[grants.echo]
decision = "deny"  # never

[roots.notes]
path = "{notes}"
class = "secret"

[workspace]
class = "public"
"""

_calls = itertools.count(1)


def new_broker(base: Path, text: str = POLICY, **options: Any) -> Broker:
    """A brokerd on the home `base/home`, its workspace `base/ws`, its policy the file
    `base/policy.toml` (written from `text` the first time, then read as it is on disk)."""
    policy_file = base / "policy.toml"
    if not policy_file.exists():
        policy_file.write_text(text.replace("{notes}", str(base / "notes")))
    policy = parse_policy(policy_file.read_text(), policy_file)
    return Broker(
        builtin_registry(options.pop("core", ())),
        policy,
        base / "ws",
        base / "home",
        TickingClock(),
        **options,
    )


async def call(
    broker: Broker,
    tool: str,
    session: p.SessionId = S1,
    *,
    raw: str | None = None,
    definition: str | None = None,
    identity: str | None = None,
    **arguments: Any,
) -> p.ToolResponse:
    """`broker`'s answer to one call of `tool` with `arguments` (or the JSON text `raw`), made
    by `session` as `identity` (by default, the one the session was born with)."""
    text = json.dumps(arguments) if raw is None else raw
    born = f"born-{session.value}" if identity is None else identity
    request = p.ToolRequest(session, next(_calls), tool, text, definition, identity=born)
    return await broker.call(request)


def waits(response: p.ToolResponse) -> str:
    """The id of a call that waits for the owner."""
    assert isinstance(response, p.PendingApprovalResponse), response
    return response.id


def content(response: p.ToolResponse) -> str:
    assert isinstance(response, p.ResultResponse), response
    return response.content


def said(text: str) -> p.ResultResponse:
    """What brokerd says of its own (not a file's content)."""
    return p.ResultResponse(text, DataClass.PUBLIC, untrusted=False, truncated=False)


def wrote(path: str, size: int, data_class: DataClass = DataClass.PUBLIC) -> p.ResultResponse:
    return p.ResultResponse(f"Wrote {size} bytes to {path} (new file).", data_class,
                            untrusted=False, truncated=False)  # fmt: skip


# --- allowed ------------------------------------------------------------------------------------


async def test_a_read_runs_and_its_content_is_untrusted_of_the_roots_class(base: Path) -> None:
    broker = new_broker(base)
    (base / "ws" / "a.txt").write_text("hello\n")
    (base / "notes" / "n.txt").write_text("a secret\n")
    assert await call(broker, "read_file", path="a.txt") == p.ResultResponse(
        "     1\thello", DataClass.PUBLIC, untrusted=True, truncated=False
    )
    notes = base / "notes"
    assert await call(broker, "read_file", path=f"{notes}/n.txt") == p.ResultResponse(
        "     1\ta secret", DataClass.SECRET, untrusted=True, truncated=False
    )
    assert broker.calls == 2


async def test_a_result_over_the_cap_comes_back_whole_the_cap_is_loopds(base: Path) -> None:
    broker = new_broker(base)
    lines = [
        f"line {n} of a long build log, where the tail says what failed" for n in range(1, 601)
    ]
    (base / "ws" / "build.log").write_text("\n".join(lines) + "\n")
    response = await call(broker, "read_file", path="build.log")
    assert isinstance(response, p.ResultResponse)
    assert len(response.content.encode()) > 16 * 1024 * 2
    assert response.content.splitlines() == [f"{n:>6}\t{line}" for n, line in enumerate(lines, 1)]
    assert not response.truncated


# --- denied -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        (
            "read_file",
            {"path": "/etc/passwd"},
            "/etc/passwd is outside the workspace ({ws}) and every root the policy grants",
        ),
        (
            "write_file",  # asks inside the workspace; outside it nobody is asked
            {"path": "/etc/profile", "content": ""},
            "/etc/profile is outside the workspace ({ws}) and every root the policy grants",
        ),
        ("read_file", {"path": "../notes/n.txt"},
         "'../notes/n.txt' holds '..': write the path without it"),
        ("read_file", {"path": "sub/../../x"},
         "'sub/../../x' holds '..': write the path without it"),
        ("write_file", {"path": "{notes}/n.txt", "content": "x"},
         "notes is granted read, not write"),
        ("echo", {"text": "hi"}, "the policy denies echo (policy.toml [grants.echo])"),
    ],
)  # fmt: skip
async def test_a_denied_call_is_refused_with_the_reason_and_not_run(
    base: Path, tool: str, arguments: dict[str, str], reason: str
) -> None:
    broker = new_broker(base)
    (base / "notes" / "n.txt").write_text("a secret\n")
    places = {"ws": base / "ws", "notes": base / "notes"}
    arguments = {key: value.format(**places) for key, value in arguments.items()}
    response = await call(broker, tool, **arguments)
    assert response == p.DeniedResponse(reason.format(**places))
    assert broker.calls == 0
    assert broker.status() == "0 calls run; 0 waiting for the owner"
    assert (base / "notes" / "n.txt").read_text() == "a secret\n"


# --- asked, and each answer -----------------------------------------------------------------------


async def test_an_ask_waits_under_an_id_with_a_one_line_summary_and_runs_nothing(
    base: Path,
) -> None:
    broker = new_broker(base)
    response = await call(broker, "write_file", path="notes/todo.md", content="- milk\n")
    assert isinstance(response, p.PendingApprovalResponse)
    assert response.id.startswith("a-")
    assert response.summary == "write_file notes/todo.md"
    clock = await call(broker, "clock")  # no grant: ask; no path: its arguments
    assert isinstance(clock, p.PendingApprovalResponse)
    assert clock.summary == "clock {}"
    assert clock.id != response.id
    assert not (base / "ws" / "notes").exists()
    assert broker.status() == "0 calls run; 2 waiting for the owner"


async def test_once_runs_the_call_and_the_next_one_asks_again(base: Path) -> None:
    broker = new_broker(base)
    id = waits(await call(broker, "write_file", path="todo.md", content="- milk\n"))
    assert await broker.approve(S1, id, ONCE) == wrote("todo.md", 7)
    assert (base / "ws" / "todo.md").read_text() == "- milk\n"
    again = waits(await call(broker, "write_file", path="todo.md", content="- eggs\n"))
    assert again != id
    assert isinstance(await broker.approve(S1, id, ONCE), p.FailedResponse)  # answered already
    assert (base / "ws" / "todo.md").read_text() == "- milk\n"
    assert broker.calls == 1


async def test_session_allows_the_tool_for_that_session_only_and_survives_a_restart(
    base: Path,
) -> None:
    broker = new_broker(base)
    ws = base / "ws"
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    assert await broker.approve(S1, id, SESSION) == wrote("a.md", 1)
    assert await call(broker, "write_file", path="b.md", content="bb") == wrote("b.md", 2)
    waits(await call(broker, "write_file", S2, path="c.md", content="c"))  # another session
    waits(await call(broker, "edit_file", path="a.md", old="a", new="b"))  # another tool
    assert sorted(path.name for path in ws.iterdir()) == ["a.md", "b.md"]
    grants = base / "home" / "broker" / "grants"
    assert sorted(path.name for path in grants.iterdir()) == ["s1.json"]
    held = {"identity": "born-s1", "tools": ["write_file"]}
    assert json.loads((grants / "s1.json").read_text()) == held

    restarted = new_broker(base)  # a new brokerd on the same home
    assert await call(restarted, "write_file", path="d.md", content="d") == wrote("d.md", 1)
    waits(await call(restarted, "write_file", S2, path="e.md", content="e"))
    assert not (ws / "e.md").exists()


async def test_a_new_session_under_a_removed_ones_id_holds_none_of_its_grants(
    base: Path,
) -> None:
    broker = new_broker(base)
    grants = base / "home" / "broker" / "grants"
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    assert await broker.approve(S1, id, SESSION) == wrote("a.md", 1)
    # The id taken again by another session (another first line: another identity), even when
    # the removal was never told (brokerd down): the grant is the old identity's alone.
    waits(await call(broker, "write_file", identity="born-again", path="b.md", content="b"))
    waits(await call(new_broker(base), "write_file", identity="born-again", path="b.md",
                     content="b"))  # fmt: skip
    assert (grants / "s1.json").exists()
    # Told of another's removal (a session of the id made and removed since), it keeps them.
    await broker.session_removed(S1, "born-before")
    assert (grants / "s1.json").exists()
    # Told of the removal, brokerd ends them: the file, and what it remembers.
    await broker.session_removed(S1, "born-s1")
    assert not (grants / "s1.json").exists()
    waits(await call(broker, "write_file", path="c.md", content="c"))
    assert sorted(path.name for path in (base / "ws").iterdir()) == ["a.md"]


async def test_grants_kept_before_identities_hold_for_no_session(base: Path) -> None:
    grants = base / "home" / "broker" / "grants"
    grants.mkdir(parents=True)
    (grants / "s1.json").write_text('["write_file"]\n')  # which s1 it was, nothing says
    broker = new_broker(base)
    waits(await call(broker, "write_file", path="a.md", content="a"))
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    assert await broker.approve(S1, id, SESSION) == wrote("a.md", 1)
    held = {"identity": "born-s1", "tools": ["write_file"]}
    assert json.loads((grants / "s1.json").read_text()) == held


async def test_always_runs_and_writes_the_allow_into_the_policy_keeping_its_comments(
    base: Path,
) -> None:
    broker = new_broker(base)
    policy_file = base / "policy.toml"
    before = policy_file.read_text()
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    assert await broker.approve(S1, id, ALWAYS) == wrote("a.md", 1)
    after = policy_file.read_text()
    assert after == before.replace(
        'decision = "ask"  # ask me before any write',
        'decision = "allow"  # ask me before any write',
    )
    assert after != before
    # From now on, in every session, and in a brokerd that loads the policy again.
    assert await call(broker, "write_file", S2, path="b.md", content="b") == wrote("b.md", 1)
    reloaded = load_policy(policy_file, PurePosixPath(base / "ws"), [base / "home"])
    assert reloaded.grant("write_file").decision is Decision.ALLOW
    restarted = new_broker(base)
    assert await call(restarted, "write_file", S2, path="c.md", content="c") == wrote("c.md", 1)


async def test_always_that_would_break_an_example_runs_once_and_leaves_the_policy(
    base: Path,
) -> None:
    example = '\n[[examples]]\ntool = "write_file"\narguments = { path = "x.md", content = "" }\n'
    broker = new_broker(base, POLICY + example + 'decision = "ask"\n')
    policy_file = base / "policy.toml"
    before = policy_file.read_bytes()
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    response = await broker.approve(S1, id, ALWAYS)
    shown = content(response)
    assert shown.startswith("Wrote 1 bytes to a.md (new file).\n(allowed once: the policy was "
                            f"not changed: {policy_file}: example 1 (write_file ")  # fmt: skip
    assert "expects ask, the policy gives allow" in shown
    assert (base / "ws" / "a.md").read_text() == "a"
    assert policy_file.read_bytes() == before
    waits(await call(broker, "write_file", path="b.md", content="b"))  # still asks


async def test_deny_refuses_the_call_and_it_does_not_run(base: Path) -> None:
    broker = new_broker(base)
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    assert await broker.approve(S1, id, DENY) == p.DeniedResponse(
        "the owner said no; it was not run"
    )
    assert not (base / "ws" / "a.md").exists()
    assert isinstance(await broker.approve(S1, id, ONCE), p.FailedResponse)  # it is gone
    assert not (base / "ws" / "a.md").exists()
    assert broker.calls == 0


async def test_an_approve_with_an_unknown_id_or_another_sessions_fails_and_runs_nothing(
    base: Path,
) -> None:
    broker = new_broker(base)
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    assert await broker.approve(S1, "a-0000000000000000", ONCE) == p.FailedResponse(
        "no call waits for an answer as 'a-0000000000000000'; it was not run"
    )
    assert await broker.approve(S2, id, ALWAYS) == p.FailedResponse(
        f"no call waits for an answer as {id!r}; it was not run"
    )
    assert not (base / "ws" / "a.md").exists()
    assert "ask me" in (base / "policy.toml").read_text()  # no always was written
    assert broker.calls == 0
    # The call still waits for its own session's answer.
    assert await broker.approve(S1, id, ONCE) == wrote("a.md", 1)


# --- what is checked before anything runs ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "raw", "problem"),
    [
        ("read_file", '{"path": 5}', "The arguments of read_file do not fit its schema: "
                                     "$.path: expected string, got integer."),
        ("read_file", '{"path": "a.txt", "offset": 0}', "The arguments of read_file do not fit "
                                                        "its schema: $.offset: 0 is less than the "
                                                        "minimum of 1."),
        ("write_file", '{"path": "a.txt", "content": ["x"]}', "The arguments of write_file do not "
                                                              "fit its schema: $.content: expected "
                                                              "string, got array."),
        ("write_file", '{"path": "a.txt"}', "The arguments of write_file miss the required field "
                                            "'content'. Call it again with 'path', 'content'."),
        ("write_file", '{"path": "a.txt", ', "The arguments of write_file are not valid JSON"),
        ("write_file", '["a.txt", "x"]', "The arguments of write_file must be a JSON object."),
    ],
)  # fmt: skip
async def test_arguments_that_do_not_fit_the_schema_are_told_and_nothing_runs(
    base: Path, tool: str, raw: str, problem: str
) -> None:
    broker = new_broker(base, SHIPPED_POLICY)  # both tools allowed: only the check stops them
    (base / "ws" / "a.txt").write_text("untouched\n")
    response = await call(broker, tool, raw=raw)
    assert isinstance(response, p.ResultResponse)
    assert response.content.startswith(problem)
    assert response == failed(response.content)  # an error: it did not run
    assert broker.calls == 0
    assert (base / "ws" / "a.txt").read_text() == "untouched\n"


async def test_arguments_are_checked_before_anyone_is_asked(base: Path) -> None:
    broker = new_broker(base)
    response = await call(broker, "write_file", path="a.md", content=5)
    assert response == failed("The arguments of write_file do not fit its schema: "
                              "$.content: expected string, got integer.")  # fmt: skip
    assert broker.status() == "0 calls run; 0 waiting for the owner"


async def test_an_unknown_tool_is_refused(base: Path) -> None:
    broker = new_broker(base)
    assert await call(broker, "rm_rf", path=".") == p.FailedResponse(
        "unknown tool 'rm_rf'; use find_tool to find one, then call_tool"
    )
    assert broker.calls == 0


@pytest.mark.parametrize(
    "definition",
    ["0" * 64, definition_hash(READ_FILE)],  # changed since; another tool's
    ids=["changed", "another-tools"],
)
async def test_a_call_made_with_another_definition_is_refused_and_not_run(
    base: Path, definition: str
) -> None:
    broker = new_broker(base, SHIPPED_POLICY)  # write_file allowed
    response = await call(broker, "write_file", definition=definition, path="a.md", content="a")
    assert response == p.FailedResponse(
        "this session was made with another definition of write_file, and brokerd's has changed "
        "since; it does not run a call with other semantics than the session was given. A new "
        "session has write_file as it is now."
    )
    assert not (base / "ws" / "a.md").exists()
    assert broker.calls == 0


async def test_a_call_with_brokerds_own_definition_runs(base: Path) -> None:
    broker = new_broker(base, SHIPPED_POLICY)
    definition = definition_hash(WRITE_FILE)
    response = await call(broker, "write_file", definition=definition, path="a.md", content="a")
    assert response == wrote("a.md", 1, DataClass.PRIVATE)
    assert (base / "ws" / "a.md").read_text() == "a"


# --- find_tool and the listing --------------------------------------------------------------------


async def test_find_tool_finds_read_file_for_read(base: Path) -> None:
    broker = new_broker(base)
    response = await call(broker, "find_tool", query="read")
    text = content(response)
    assert response == said(text)
    schemas, how = text.split("\n")
    found = json.loads(schemas)
    assert found[0] == p.unstructure(READ_FILE)  # the best match first, its whole schema
    assert how == "Call it with call_tool."
    assert broker.calls == 0  # a search of the registry runs no tool


async def test_find_tool_says_when_no_tool_matches(base: Path) -> None:
    broker = new_broker(base)
    assert await call(broker, "find_tool", query="zebra") == said("No tool matches.")


async def test_the_listing_gives_every_tool_its_hash_its_core_flag_and_its_grant(
    base: Path,
) -> None:
    config = make_config('[tools]\ncore = ["read_file", "echo"]\n', base / "home")
    broker = new_broker(base, core=config.tools.core)
    listed = broker.listing().tools
    assert all(tool.definition == definition_hash(tool.schema) for tool in listed)
    table = {tool.schema.name: (tool.core, tool.grant, tool.source) for tool in listed}
    assert table == {
        "find_tool": (True, "allow", "always (a search of the registry)"),
        "clock": (True, "ask", "default (no grant: ask)"),
        "echo": (True, "deny", "policy.toml [grants.echo]"),
        "read_file": (True, "allow", "policy.toml [grants.read_file]"),
        "list_dir": (False, "ask", "default (no grant: ask)"),
        "search_files": (False, "ask", "default (no grant: ask)"),
        "write_file": (False, "ask", "policy.toml [grants.write_file]"),
        "edit_file": (False, "ask", "default (no grant: ask)"),
        "shell": (False, "ask", "default (no grant: ask)"),
        "run_cell": (False, "ask", "default (no grant: ask)"),
        "remember": (False, "ask", "default (no grant: ask)"),
        "forget": (False, "ask", "default (no grant: ask)"),
        "recall": (False, "ask", "default (no grant: ask)"),
        "schedule": (False, "ask", "default (no grant: ask)"),
        "list_schedules": (False, "ask", "default (no grant: ask)"),
        "cancel_schedule": (False, "ask", "default (no grant: ask)"),
    }
    assert broker.listing().roots == (
        p.ListedRoot(
            "workspace", str(base / "ws"), True, True, DataClass.PUBLIC, "not looked at yet"
        ),
        p.ListedRoot("notes", str(base / "notes"), True, False, DataClass.SECRET),
    )
    await broker.checkpoints.warm(broker.roots)  # brokerd's start: each writable root once
    assert broker.listing().roots[0].checkpoints == "kept"


async def test_the_listing_follows_an_always_answer(base: Path) -> None:
    broker = new_broker(base)
    id = waits(await call(broker, "write_file", path="a.md", content="a"))
    await broker.approve(S1, id, ALWAYS)
    grant = {tool.schema.name: (tool.grant, tool.source) for tool in broker.listing().tools}
    assert grant["write_file"] == ("allow", "policy.toml [grants.write_file]")


# --- the calls waiting for the owner: bounded in number and in time -------------------------------


async def test_past_most_pending_the_oldest_waiting_call_is_dropped(base: Path) -> None:
    broker = new_broker(base)
    ids = [waits(await call(broker, "clock")) for _ in range(MOST_PENDING + 1)]
    assert broker.status() == f"0 calls run; {MOST_PENDING} waiting for the owner"
    assert await broker.approve(S1, ids[0], ONCE) == p.FailedResponse(
        f"no call waits for an answer as {ids[0]!r}; it was not run"
    )
    assert broker.calls == 0
    assert content(await broker.approve(S1, ids[1], ONCE)) == "2026-11-29T21:31:34.123456Z"
    assert isinstance(await broker.approve(S1, ids[-1], ONCE), p.ResultResponse)


async def test_a_call_nobody_answered_expires_a_minute_after_the_approval_timeout(
    base: Path, autojump_clock: trio.testing.MockClock
) -> None:
    broker = new_broker(base, approval_timeout=300.0)
    first = waits(await call(broker, "clock"))
    start = trio.current_time()
    await trio.sleep(300 + 60)  # just in time: loopd's own wait ended a minute ago
    assert isinstance(await broker.approve(S1, first, ONCE), p.ResultResponse)
    second = waits(await call(broker, "clock"))
    await trio.sleep(300 + 60 + 1)
    assert trio.current_time() == start + 2 * 360 + 1
    assert await broker.approve(S1, second, ONCE) == p.FailedResponse(
        f"no call waits for an answer as {second!r}; it was not run"
    )
    assert broker.calls == 1
    assert broker.status() == "1 calls run; 0 waiting for the owner"


async def test_a_summary_never_carries_a_control_character_to_the_owners_terminal(
    tmp_path: Path,
) -> None:
    from boxmaker.brokerd.files.roots import Located, Root
    from boxmaker.brokerd.policy.asking import question
    from boxmaker.brokerd.policy.rules import Decision, Verdict

    root = Root("workspace", PurePosixPath(tmp_path), True, True, DataClass.PRIVATE)
    path = "autostart/\x1b[2K\rAllow read_file notes.md\x1b[8m.desktop"
    verdict = Verdict(Decision.ASK, "asks", "test", Located(root, tuple(path.split("/"))))
    summary = question("write_file", {"path": path}, verdict)
    assert "\x1b" not in summary
    assert "\r" not in summary
    assert summary.startswith("write_file autostart/")
