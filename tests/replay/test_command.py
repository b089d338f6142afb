"""`bxctl replay` (loopd's replay in a process of its own): its report, its exit status, and
that it reaches for nothing: no server, no brokerd, no socket (SPEC section 20)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import attrs
import trio

from boxmaker import proto as p

from ..processes import BIN
from .test_basic import recorded, rewrite
from .test_fixtures import FIXTURES


def bxctl_replay(*words: str) -> tuple[int, str, str]:
    result = subprocess.run(
        [BIN / "bxctl", "replay", *words], capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    return result.returncode, result.stdout, result.stderr


def _call_id(records: list[p.LogRecord]) -> list[p.LogRecord]:
    """A byte of a completion changed on disk: its tool call's id (the call_sent after it
    names the id the model gave)."""
    at = next(i for i, r in enumerate(records) if isinstance(r, p.AssistantRecord))
    record = records[at]
    assert isinstance(record, p.AssistantRecord)
    assert record.tool_calls
    call = attrs.evolve(record.tool_calls[0], id="changed")
    records[at] = attrs.evolve(record, tool_calls=(call,))
    return records


async def test_replay_says_identical_or_the_first_difference_and_connects_nowhere(
    tmp_path: Path,
) -> None:
    folder, _ = await recorded(tmp_path / "home")
    home = folder.parent.parent
    # The config names a server and a brokerd that fail the test if anything connects.
    server = socket.create_server(("127.0.0.1", 0))
    broker = socket.socket(socket.AF_UNIX)
    broker.bind(str(tmp_path / "broker.sock"))
    broker.listen()
    for listener in (server, broker):
        listener.setblocking(False)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[paths]\nhome = "{home}"\n[server]\nbase_url = "http://127.0.0.1:'
        f'{server.getsockname()[1]}"\n[broker]\nsocket = "{tmp_path / "broker.sock"}"\n'
    )
    code, out, err = await trio.to_thread.run_sync(
        bxctl_replay, "chat-1", "--home", str(home), "--config", str(config)
    )
    assert (code, err) == (0, ""), out
    assert out.startswith("session chat-1: identical (3 turns replayed, ")
    rewrite(folder, _call_id)
    code, out, _ = await trio.to_thread.run_sync(bxctl_replay, "chat-1", "--home", str(home))
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "session chat-1: differs in turn 1"
    assert lines[1].startswith("  recorded epoch 0 line 5, replayed epoch 0 line 5: call_sent, ")
    assert "field tool_call_id" in lines[1]
    code, out, _ = await trio.to_thread.run_sync(
        bxctl_replay, "chat-1", "--home", str(home), "--json"
    )
    report = json.loads(out)
    assert (code, report["identical"], report["difference"]["record"]) == (1, False, "call_sent")
    assert report["difference"]["recorded_at"] == {"epoch": 0, "line": 5}
    for listener in (server, broker):
        try:
            listener.accept()
            raise AssertionError(f"something connected to {listener}")
        except BlockingIOError:
            pass  # nobody came
        listener.close()


def test_step_shows_each_request_before_its_completion_and_quits_on_q(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "replay-tools", tmp_path / "sessions" / "replay-tools")
    result = subprocess.run(
        [BIN / "bxctl", "replay", "replay-tools", "--home", str(tmp_path), "--step"],
        input="n\nn\nq\n", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    shown = result.stdout.split("[n]ext, [c]ontinue, [q]uit? \n")
    assert shown[0] == "0:2 user: Echo hi.\n"
    assert shown[1].startswith(
        "── request before epoch 0 line 3: 2 messages, the first 0 as the request before sent "
        "them (what the cache can keep)\n   + system: "
    )
    assert "0:3 assistant:  [calls call_tool(" in shown[1]
    assert shown[2] == "0:4 usage: 0 tokens from the cache, 561 processed, 28 predicted\n"
    assert len(shown) == 4  # quit at the third: no more records, no report
    whole = subprocess.run(
        [BIN / "bxctl", "replay", "replay-tools", "--home", str(tmp_path), "--step"],
        input="c\n", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert whole.returncode == 0
    assert "── request before epoch 0 line 7: 4 messages, the first 2 as" in whole.stdout
    assert whole.stdout.endswith("identical (3 turns replayed, 31 lines compared)\n")


def test_all_replays_every_session_with_a_line_of_progress_and_a_table(tmp_path: Path) -> None:
    for name in ("replay-tools", "chat-plain"):
        shutil.copytree(FIXTURES / name, tmp_path / "sessions" / name)
    result = subprocess.run(
        [BIN / "bxctl", "replay", "--all", "--home", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 3  # the worst: a log from before replay
    assert result.stderr == "replaying 1/2: chat-plain\nreplaying 2/2: replay-tools\n"
    rows = [line.split(None, 3) for line in result.stdout.splitlines()]
    assert rows[0] == ["SESSION", "TURNS", "LINES", "RESULT"]
    assert rows[1] == ["chat-plain", "0", "0", "missing input at epoch 0 line 2"]
    assert rows[2] == ["replay-tools", "3", "31", "identical"]
