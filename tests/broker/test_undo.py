"""Checkpoints and undo through brokerd's `Broker`, with the real sandbox (SPEC section 21):
each kind of change a call makes is undone byte for byte (the whole tree compared: contents,
modes, links, owners), across turns; an owner's edit since stops the undo; a root over its
bounds says so in the call's result; and the modes deny, ask and allow as they say."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import trio

from boxmaker import proto as p
from boxmaker.brokerd import SHIPPED_POLICY, Broker
from boxmaker.brokerd.undo import Checkpointing
from boxmaker.config import CheckpointsConfig

from ..checkpoints.trees import tree_of
from ..helpers import real_sandbox
from .test_hands import hands, running
from .test_service import S1, S2, content, new_broker, waits

_calls = iter(range(1, 10_000))


async def act(
    broker: Broker, tool: str, turn: int, session: p.SessionId = S1, **arguments: object
) -> p.ToolResponse:
    """A call of `tool` in `turn` of `session` (its identity the one it was born with)."""
    import json

    request = p.ToolRequest(
        session, next(_calls), tool, json.dumps(arguments), turn=turn, identity=f"born-{session}"
    )
    return await broker.call(request)


async def undo(
    broker: Broker, turn: int, *, force: bool = False, session: p.SessionId = S1
) -> p.UndoPreviewFrame | p.UndoneFrame | p.WireError:
    """Preview the undo of `session`'s changes from `turn` on, then confirm it."""
    frame = p.UndoFrame(session, turn, force=force, identity=f"born-{session}")
    preview = await broker.undo(frame)
    if not isinstance(preview, p.UndoPreviewFrame) or (preview.conflicts and not force):
        return preview  # type: ignore[return-value]
    confirm = p.UndoFrame(session, turn, force=force, confirm=preview.token,
                          identity=f"born-{session}")  # fmt: skip
    return await broker.undo(confirm)  # type: ignore[return-value]


def sandboxed(base: Path) -> Broker:
    return new_broker(base, SHIPPED_POLICY, hands=hands(real_sandbox(base / "ws")))


async def test_each_kind_of_change_is_undone_byte_for_byte(base: Path) -> None:
    broker = sandboxed(base)
    ws = base / "ws"
    (ws / "keep.txt").write_text("kept\n")
    (ws / "edit.md").write_text("one\ntwo\n")
    (ws / "tree" / "deep").mkdir(parents=True)
    (ws / "tree" / "deep" / "a.bin").write_bytes(bytes(range(256)))
    os.chmod(ws / "tree" / "deep" / "a.bin", 0o600)
    (ws / "link").symlink_to("keep.txt")
    for tree in (ws, *ws.rglob("*")):  # as the sandbox's user would own them
        os.lchown(tree, *_owner(ws))
    start = tree_of(ws)
    with trio.fail_after(120):
        async with running(broker):
            content(await act(broker, "write_file", 1, path="new/made.txt", content="new\n"))
            content(await act(broker, "edit_file", 1, path="edit.md", old="two", new="2"))
            content(await act(broker, "shell", 2, command="rm -rf tree; ln -sfn edit.md link"))
            cell = "open('cell.txt', 'w').write('from a cell')"
            content(await act(broker, "run_cell", 3, code=cell))
            assert not (ws / "tree").exists()
            assert (ws / "cell.txt").exists()
            preview = await broker.undo(p.UndoFrame(S1, 1, identity=f"born-{S1}"))
            assert isinstance(preview, p.UndoPreviewFrame), preview
            shown = {change.path: change for change in preview.changes}
            assert {"new/made.txt", "edit.md", "tree/deep/a.bin", "link", "cell.txt"} <= set(shown)
            assert "@@ -1,2 +1,2 @@\n one\n-2\n+two\n" in shown["edit.md"].diff
            done = await undo(broker, 1)
            assert isinstance(done, p.UndoneFrame), done
    assert tree_of(ws) == start  # every byte, mode, link and owner as it was


async def test_an_undo_of_the_last_turn_keeps_the_turns_before(base: Path) -> None:
    broker = sandboxed(base)
    ws = base / "ws"
    with trio.fail_after(60):
        async with running(broker):
            for turn in (1, 2, 3):
                content(await act(broker, "write_file", turn, path=f"t{turn}.txt", content="x"))
            after_two = {k: v for k, v in tree_of(ws).items() if k != "t3.txt"}
            assert isinstance(await undo(broker, 3), p.UndoneFrame)
            assert tree_of(ws) == after_two
            assert isinstance(await undo(broker, 1), p.UndoneFrame)  # across turns 1 and 2
            assert not any(name.startswith("t") for name in os.listdir(ws))


async def test_the_owners_edit_since_stops_the_undo_unless_forced(base: Path) -> None:
    broker = sandboxed(base)
    ws = base / "ws"
    with trio.fail_after(60):
        async with running(broker):
            content(await act(broker, "write_file", 1, path="plan.md", content="agent's\n"))
            (ws / "plan.md").write_text("the owner's own\n")  # the owner edits it since
            (ws / "other.md").write_text("untouched by the turn\n")
            stopped = await undo(broker, 1)
            assert isinstance(stopped, p.UndoPreviewFrame)
            assert [c.path for c in stopped.conflicts] == ["plan.md"]
            confirm = p.UndoFrame(S1, 1, confirm=stopped.token, identity=f"born-{S1}")
            refused = await broker.undo(confirm)  # a channel that confirms all the same
            assert isinstance(refused, p.WireError)
            assert "the undo stops on what others changed since: plan.md" in refused.message
            assert (ws / "plan.md").read_text() == "the owner's own\n"  # nothing written
            forced = await undo(broker, 1, force=True)
            assert isinstance(forced, p.UndoneFrame), forced
            assert not (ws / "plan.md").exists()
            assert (ws / "other.md").read_text() == "untouched by the turn\n"  # never touched


async def test_another_sessions_calls_are_not_undone(base: Path) -> None:
    broker = sandboxed(base)
    ws = base / "ws"
    with trio.fail_after(60):
        async with running(broker):
            content(await act(broker, "write_file", 1, path="mine.txt", content="1"))
            content(await act(broker, "write_file", 1, S2, path="theirs.txt", content="2"))
            assert isinstance(await undo(broker, 1), p.UndoneFrame)
            assert sorted(os.listdir(ws)) == ["theirs.txt"]


async def test_a_nested_git_repository_is_undone_whole(base: Path) -> None:
    broker = sandboxed(base)
    ws = base / "ws"
    repo = ws / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", ".")
    (repo / "a.txt").write_text("first\n")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-qm", "first")
    for path in (ws, *ws.rglob("*")):
        os.lchown(path, *_owner(ws))
    start = tree_of(ws)
    command = "cd repo && echo second > a.txt && git -c user.name=a -c user.email=a@a "
    command += "commit -qam second && rm -rf .git/hooks"
    with trio.fail_after(60):
        async with running(broker):
            ran = content(await act(broker, "shell", 1, command=command))
            assert "[exit 0" in ran, ran
            assert tree_of(ws) != start
            assert isinstance(await undo(broker, 1), p.UndoneFrame)
    assert tree_of(ws) == start
    assert _git(repo, "log", "--format=%s") == "first\n"


async def test_a_root_over_its_bounds_says_it_has_no_checkpoints(base: Path) -> None:
    small = CheckpointsConfig(max_files=3)
    broker = new_broker(base, SHIPPED_POLICY, checkpoints=Checkpointing(base / "home", small))
    ws = base / "ws"
    ws.mkdir(exist_ok=True)
    for n in range(5):
        (ws / f"f{n}").write_text("x")
    with trio.fail_after(30):
        said = content(await act(broker, "write_file", 1, path="new.txt", content="y"))
    assert "No checkpoint was taken: the workspace holds more than 3 files" in said, said
    assert "cannot be undone" in said
    assert broker.listing().roots[0].checkpoints == "none: holds more than 3 files"
    refused = await undo(broker, 1)
    assert isinstance(refused, p.WireError)
    assert "made no change" in refused.message


async def test_modes_deny_ask_and_allow_as_they_say(base: Path) -> None:
    broker = new_broker(base, SHIPPED_POLICY)
    import json

    def request(tool: str, mode: p.Mode, **arguments: object) -> p.ToolRequest:
        return p.ToolRequest(S1, next(_calls), tool, json.dumps(arguments), mode=mode,
                             identity=f"born-{S1}")  # fmt: skip

    writes = {"write_file": {"path": "a", "content": "b"}, "remember": {"text": "a note"},
              "shell": {"command": "ls"}, "run_cell": {"code": "1"},
              "edit_file": {"path": "a", "old": "b", "new": "c"}}  # fmt: skip
    reads = {"read_file": {"path": "a"}, "list_dir": {"path": "."}, "clock": {}}
    with trio.fail_after(30):
        for tool, arguments in writes.items():
            denied = await broker.call(request(tool, p.Mode.READ_ONLY, **arguments))
            assert isinstance(denied, p.DeniedResponse), (tool, denied)
            assert "this session is read-only" in denied.reason
            if tool in ("shell", "run_cell"):
                continue  # no sandbox here: denied whatever the mode
            asked = await broker.call(request(tool, p.Mode.ASK, **arguments))
            assert isinstance(asked, p.PendingApprovalResponse), tool
            assert asked.only_once
        for tool, arguments in reads.items():
            for mode in p.Mode:
                answer = await broker.call(request(tool, mode, **arguments))
                assert not isinstance(answer, p.DeniedResponse | p.PendingApprovalResponse)
        # A `session` answer in ask mode runs the call once: no grant is kept.
        asked = await broker.call(request("write_file", p.Mode.ASK, path="a", content="1"))
        content(await broker.approve(S1, waits(asked), p.Answer.SESSION))
        again = await broker.call(request("write_file", p.Mode.ASK, path="a", content="2"))
        waits(again)
        ran = await broker.call(request("write_file", p.Mode.AUTO, path="a", content="3"))
        assert isinstance(ran, p.ResultResponse)  # auto: the policy's allow, as before
        # A tool the policy asks for: a `session` answer given in ask mode grants nothing
        # when the session goes back to auto.
        later = {"when": "in 20m", "message": "check the build"}
        asked = await broker.call(request("schedule", p.Mode.ASK, **later))
        content(await broker.approve(S1, waits(asked), p.Answer.SESSION))
        waits(await broker.call(request("schedule", p.Mode.AUTO, **later)))


def _git(repo: Path, *words: str) -> str:
    """Run git in `repo` (another user's, under root: marked safe), its output."""
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    done = subprocess.run([*git, "-c", "safe.directory=*", *words], capture_output=True,
                          text=True, timeout=30, check=True)  # fmt: skip
    return done.stdout


def _owner(ws: Path) -> tuple[int, int]:
    st = os.stat(ws)
    return st.st_uid, st.st_gid
