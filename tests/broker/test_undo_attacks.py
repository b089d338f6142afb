"""Undo and its checkpoints attacked as a hostile model would (issue 47): each test is an attack
that worked before its defence, kept so it cannot work again. The model controls what runs in
the sandbox between a checkpoint and an undo; the owner must still be able to undo, and be
told the truth."""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
from pathlib import Path

import trio

from boxmaker import proto as p
from boxmaker.brokerd import SHIPPED_POLICY, Broker
from boxmaker.brokerd.undo import Checkpointing
from boxmaker.channel import BrokerClient, BrokerdConnection
from boxmaker.config import CheckpointsConfig

from ..helpers import real_sandbox
from .test_hands import hands, running
from .test_service import S1, S2, content, new_broker, waits
from .test_undo import act, sandboxed


def over_the_wire(request: p.UndoFrame, answer: object) -> object:
    """What loopd decodes when brokerd answers `request` with `answer` (both ends' codecs)."""
    client, server = BrokerClient(), BrokerdConnection()
    server.receive_data(client.send(request))
    assert isinstance(server.next_request(), p.UndoFrame)
    client.receive_data(server.answer(answer))  # type: ignore[arg-type]
    return client.next_answer()


async def preview_and_undo(broker: Broker, turn: int = 1) -> None:
    """Preview and make the undo of `turn`, each answer as loopd reads it off the socket."""
    frame = p.UndoFrame(S1, turn, identity=f"born-{S1}")
    preview = await broker.undo(frame)
    assert isinstance(over_the_wire(frame, preview), p.UndoPreviewFrame), preview
    assert isinstance(preview, p.UndoPreviewFrame)
    confirm = p.UndoFrame(S1, turn, confirm=preview.token, identity=f"born-{S1}")
    done = await broker.undo(confirm)
    assert isinstance(over_the_wire(confirm, done), p.UndoneFrame), done


async def test_a_name_that_is_not_utf8_does_not_break_the_undo(base: Path) -> None:
    broker = sandboxed(base)
    command = "python3 -c \"open(b'evil\\\\xff.txt','w').write('x')\"; echo ok > fine.txt"
    with trio.fail_after(60):
        async with running(broker):
            content(await act(broker, "shell", 1, command=command))
            await preview_and_undo(broker)
    assert os.listdir(base / "ws") == []


async def test_many_files_or_a_long_line_still_fit_the_preview(base: Path) -> None:
    broker = sandboxed(base)
    many = "mkdir -p mods/pkg && cd mods/pkg && seq -f 'f_%05g.js' 1 25000 | xargs touch"
    line = "python3 -c \"open('blob.txt','w').write(chr(1)*200000)\""
    with trio.fail_after(120):
        async with running(broker):
            content(await act(broker, "shell", 1, command=many))
            content(await act(broker, "shell", 2, command=line))
            frame = p.UndoFrame(S1, 1, identity=f"born-{S1}")
            preview = await broker.undo(frame)
            assert isinstance(over_the_wire(frame, preview), p.UndoPreviewFrame)
            assert isinstance(preview, p.UndoPreviewFrame)
            assert len(preview.changes) == 100
            assert any("more changes and conflicts are not listed" in n for n in preview.notes)
            line_frame = p.UndoFrame(S1, 2, identity=f"born-{S1}")
            (blob,) = (await broker.undo(line_frame)).changes  # type: ignore[union-attr]
            assert blob.path == "blob.txt"
            assert "[199,601 more characters]" in blob.diff  # the line is cut, and says so
            await preview_and_undo(broker)
    assert os.listdir(base / "ws") == []


def _texts(lines: int) -> tuple[str, str]:
    """A file of short lines, each under difflib's junk cut, and another of the same lines
    in another order: quadratic for difflib."""
    chars = [chr(c) for c in range(33, 127)] + [chr(c) for c in (*range(1, 10), *range(14, 28))]
    values = [c + "\n" for c in chars[:117]]
    rng = random.Random(2)
    before = "".join(values[i % len(values)] for i in range(lines))
    return before, "".join(rng.choice(values) for _ in range(lines))


async def test_a_preview_never_stalls_brokerds_event_loop(base: Path) -> None:
    broker = sandboxed(base)
    ws = base / "ws"
    before, after = _texts(30_000)  # 60 KB each: 27 s of difflib, once
    (ws / "data.txt").write_text(before)
    st = os.stat(ws)
    os.chown(ws / "data.txt", st.st_uid, st.st_gid)
    with trio.fail_after(120):
        async with running(broker):
            content(await act(broker, "write_file", 1, path="data.txt", content=after))
            token = trio.lowlevel.current_trio_token()
            ran: list[float] = []
            asked = trio.current_time()
            # a thread asks the loop to run a callback 1 s from now (no sleep here): how late
            # it runs is how long the loop was blocked
            timer = threading.Timer(
                1.0, token.run_sync_soon, (lambda: ran.append(trio.current_time()),)
            )
            timer.start()
            try:
                preview = await broker.undo(p.UndoFrame(S1, 1, identity=f"born-{S1}"))
            finally:
                timer.cancel()
            assert isinstance(preview, p.UndoPreviewFrame)
            (change,) = preview.changes
            assert change.diff == "text too long to diff, 30,000 lines → 30,000 lines"
            late = (ran[0] - asked - 1.0) if ran else trio.current_time() - asked
            assert late < 3.0, f"brokerd's event loop was blocked {late:.1f} s by one preview"


async def test_a_call_that_takes_the_root_past_its_bounds_says_so(base: Path) -> None:
    ws = base / "ws"
    sandbox = real_sandbox(ws)
    small = Checkpointing(base / "home", CheckpointsConfig(max_files=50))
    broker = new_broker(base, SHIPPED_POLICY, hands=hands(sandbox), checkpoints=small)
    (ws / "thesis.md").write_text("two years of the owner's work\n")
    st = os.stat(ws)
    os.chown(ws / "thesis.md", st.st_uid, st.st_gid)
    command = "rm thesis.md; mkdir junk; cd junk; touch $(seq 1 60)"
    with trio.fail_after(60):
        async with running(broker):
            said = content(await act(broker, "shell", 1, command=command))
            refused = await broker.undo(p.UndoFrame(S1, 1, identity=f"born-{S1}"))
    assert "(No checkpoint was kept: the workspace holds more than 50 files after this call." in (
        said
    )
    assert isinstance(refused, p.WireError)
    assert "the checkpoints of turn 1 are not kept" in refused.message  # not "made no change"


async def test_a_trim_keeps_what_a_call_under_way_needs(base: Path) -> None:
    ws = base / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "plan.md").write_text("the owner's plan, version 0\n")
    kept = Checkpointing(base / "home", CheckpointsConfig(keep_bytes=1), threads=False)
    broker = new_broker(base, SHIPPED_POLICY, checkpoints=kept)  # every call trims
    roots = broker.roots()
    under_way = p.ToolRequest(S1, 1, "shell", "{}", turn=1, identity=f"born-{S1}")
    with trio.fail_after(30):
        async with kept.around(under_way, roots[0], roots):  # session A's call runs...
            # ...while session B changes the file A's checkpoint holds, and trims
            content(await act(broker, "write_file", 1, S2, path="plan.md", content="v1\n"))
            content(await act(broker, "write_file", 2, S2, path="more.md", content="x" * 999))
            old = hashlib.sha256(b"the owner's plan, version 0\n").hexdigest()
            assert kept.book.objects.path_of(old).is_file()  # what A's undo will put back


async def test_an_approved_edit_is_the_edit_the_owner_was_shown(base: Path) -> None:
    broker = new_broker(base, SHIPPED_POLICY)
    settings = base / "ws" / "settings.ini"
    settings.write_text("[production]\nverify_tls=true\n\n[test]\nverify_tls = true\n")
    edit = {"path": "settings.ini", "old": "verify_tls = true", "new": "verify_tls = false"}
    request = p.ToolRequest(S1, 1, "edit_file", json.dumps(edit), mode=p.Mode.ASK, turn=1,
                            identity=f"born-{S1}")  # fmt: skip
    with trio.fail_after(30):
        asked = await broker.call(request)
        assert isinstance(asked, p.PendingApprovalResponse)
        assert "[test]" in asked.detail
        # between the question and the answer, someone else reformats the file
        settings.write_text("[production]\nverify_tls = true\n\n[test]\nverify_tls=true\n")
        refused = await broker.approve(S1, waits(asked), p.Answer.ONCE)
    assert isinstance(refused, p.FailedResponse)
    assert "the file edit_file writes changed while the owner was asked" in refused.message
    assert "[production]\nverify_tls = true" in settings.read_text()  # untouched
