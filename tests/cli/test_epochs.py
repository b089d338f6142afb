"""`bxctl show`, `verify` and `rm` on a session that crossed epochs (made by real turns against
the fake), and on epochs damaged in ways only `--all` can see."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.cli.sessions import Output, remove, show, verify
from boxmaker.clock import TickingClock
from boxmaker.loopd.loop import run_turn
from boxmaker.session import Link, index_of, opening, sha256_hex
from boxmaker.store import Store
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import open_rig
from .test_sessions import chained

SUMMARY = "We spoke of three things."


def output() -> Output:
    return Output(io.StringIO(), io.StringIO())


def text(out: Output) -> str:
    return out.out.getvalue()  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
async def home(tmp_path: Path) -> Path:
    """Session `s` in epoch 2: five turns, a new epoch asked for before the third and the fifth
    (each carries all but one of the turns it may: the context is large)."""
    script = [Reply(content="One."), Reply(content="Two."), Reply(content=SUMMARY),
              Reply(content="Three."), Reply(content="Four."), Reply(content=SUMMARY),
              Reply(content="Five.")]  # fmt: skip
    async with open_rig(tmp_path, FakeLlamaServer(script=script), session="s") as rig:
        for number, text_ in enumerate(["one", "two", "three", "four", "five"], start=1):
            await run_turn(rig.session, rig.runtime, text_, lambda _e: None,
                           new_epoch=number in (3, 5))  # fmt: skip
        assert rig.session.epoch == 2
    return tmp_path


async def test_show_gives_the_current_epoch_and_all_with_each_turn_once(home: Path) -> None:
    folder = home / "sessions" / "s"
    out = output()
    assert show(folder, out, mode="") == 0
    lines = text(out).splitlines()
    assert lines[0] == "[epoch 2: a summary of what came before, and 2 turns carried over]"
    # Each earlier epoch's own summary, word for word (history at decreasing resolution).
    assert lines[1:4] == [f"[part 1, level 1] {SUMMARY}", "", f"[part 2, level 1] {SUMMARY}"]
    assert [line for line in lines if line.startswith("> ")] == ["> three", "> four", "> five"]
    out = output()
    assert show(folder, out, mode="", every=True) == 0
    asked = [line for line in text(out).splitlines() if line.startswith("> ")]
    assert asked == ["> one", "> two", "> three", "> four", "> five"]
    assert text(out).count("[epoch ") == 2
    out = output()
    assert show(folder, out, mode="stats") == 0
    rows = text(out).splitlines()[1:-1]
    assert [row.split()[0] for row in rows] == ["3", "4", "5"]  # numbered in the whole session
    out = output()
    assert show(folder, out, mode="stats", every=True) == 0
    assert [row.split()[0] for row in text(out).splitlines()[1:-1]] == ["1", "2", "3", "4", "5"]
    out = output()
    assert show(folder, out, mode="json", every=True) == 0
    exported = json.loads(text(out))
    assert [e["epoch"] for e in exported["epochs"]] == [0, 1, 2]
    assert exported["epochs"][1] == {"epoch": 1, "summary": SUMMARY, "carried_turns": 1}
    assert exported["epochs"][2]["summary"] == "\n".join(lines[1:4])
    assert [(t["epoch"], t["number"]) for t in exported["turns"]] == [
        (0, 1), (0, 2), (1, 3), (1, 4), (2, 5),
    ]  # fmt: skip
    out = output()
    assert show(folder, out, mode="markdown", every=True) == 0
    assert "\n## Epoch 2\n" in text(out)


async def test_verify_checks_the_current_epoch_and_says_how_many_came_before(home: Path) -> None:
    out = output()
    assert verify(home, [], out) == 0
    assert text(out).startswith("ok   s: epoch 2, 2 before it: 3 turns, ")
    (home / "sessions" / "s" / "0.jsonl").write_bytes(b"ruined\n")
    out = output()
    assert verify(home, [], out) == 0  # only the current epoch is checked
    out = output()
    assert verify(home, [], out, every=True) == 1
    assert text(out).startswith(f"FAIL s: {home / 'sessions' / 's' / '0.jsonl'}:1: ")


async def test_verify_all_finds_carried_turns_that_are_not_the_old_epoch_s_end(
    home: Path,
) -> None:
    folder = home / "sessions" / "s"
    old = [p.loads(p.LogRecord, line) for line in _unsealed(folder / "1.jsonl")]
    genesis = sha256_hex((folder / "2.baseline.json").read_bytes())
    origin = sha256_hex((folder / "0.jsonl").read_bytes().splitlines(keepends=True)[0])
    forged = opening(old, index_of(old, Link(0, "")), old[-1].time, genesis, origin)
    at = next(i for i, r in enumerate(forged) if isinstance(r, p.UserRecord))
    forged[at] = p.UserRecord(forged[at].time, "four, said otherwise")  # type: ignore[union-attr]
    (folder / "2.jsonl").write_bytes(chained(forged, genesis))  # a whole chain, but not a copy
    (folder / "index.json").unlink()
    out = output()
    assert verify(home, ["s"], out) == 0  # the current epoch alone is whole
    out = output()
    assert verify(home, ["s"], out, every=True) == 1
    # Line 5: the first carried one, after session_start, epoch_start and two summaries.
    assert f"{folder / '2.jsonl'}:5: the turns carried are not the ones" in text(out)


async def test_every_epoch_names_the_session_it_belongs_to_and_verify_checks_it(
    home: Path,
) -> None:
    folder = home / "sessions" / "s"
    origin = sha256_hex((folder / "0.jsonl").read_bytes().splitlines(keepends=True)[0])
    for epoch in (1, 2):
        first = json.loads((folder / f"{epoch}.jsonl").read_bytes().splitlines()[0])
        assert first["origin"] == origin
    resumed = Store(home, TickingClock()).resume(p.SessionId("s"))
    assert resumed.identity == origin  # in epoch 2, whatever became of epoch 0's log
    resumed.close()
    # Epoch 2 made again as a copy in all but the session it names: verify --all says so.
    old = [p.loads(p.LogRecord, line) for line in _unsealed(folder / "1.jsonl")]
    genesis = sha256_hex((folder / "2.baseline.json").read_bytes())
    copy = opening(old, index_of(old, Link(0, "")), old[-1].time, genesis, origin)
    (folder / "2.jsonl").write_bytes(chained(copy, genesis))
    (folder / "index.json").unlink()
    out = output()
    assert verify(home, ["s"], out, every=True) == 0
    named = opening(old, index_of(old, Link(0, "")), old[-1].time, genesis, "0" * 64)
    (folder / "2.jsonl").write_bytes(chained(named, genesis))
    out = output()
    assert verify(home, ["s"], out, every=True) == 1
    assert f"{folder / '2.jsonl'}:1: session_start's origin is not the hash" in text(out)
    resumed = Store(home, TickingClock()).resume(p.SessionId("s"))
    assert resumed.identity == "0" * 64  # the epoch's word is taken: epoch 0 is not read
    resumed.close()
    # An epoch opened before origins were kept: epoch 0's first line, while it is there.
    legacy = opening(old, index_of(old, Link(0, "")), old[-1].time, genesis, "")
    (folder / "2.jsonl").write_bytes(chained(legacy, genesis))
    assert b'"origin"' not in (folder / "2.jsonl").read_bytes()
    resumed = Store(home, TickingClock()).resume(p.SessionId("s"))
    assert resumed.identity == origin
    resumed.close()
    (folder / "0.jsonl").unlink()  # gone: its own first line stands for it (grants are lost)
    resumed = Store(home, TickingClock()).resume(p.SessionId("s"))
    own = (folder / "2.jsonl").read_bytes().splitlines(keepends=True)[0]
    assert resumed.identity == sha256_hex(own) != origin
    resumed.close()


def _unsealed(path: Path) -> list[bytes]:
    """A log's lines without their seq, prev and hash."""
    lines = []
    for line in path.read_bytes().splitlines():
        value = json.loads(line)
        for key in ("seq", "prev", "hash"):
            del value[key]
        lines.append(json.dumps(value).encode())
    return lines


async def test_rm_locks_the_current_epoch_s_log(home: Path) -> None:
    held = Store(home, TickingClock()).resume(p.SessionId("s"))
    assert held.log_path.name == "2.jsonl"
    assert held.hold()  # as loopd does for a turn
    out = output()
    assert remove(home / "sessions" / "s", out, ask=False, answer=io.StringIO()) == 1
    held.release()
    held.close()
    assert remove(home / "sessions" / "s", out, ask=False, answer=io.StringIO()) == 0
    assert os.listdir(home / "sessions") == []
