"""`bxctl replay SESSION --with profile=P`: a recorded session's messages sent again, live, to
the (fake) server under another profile, the recorded tool results reused for the same calls,
the two conversations side by side; the what-if is a session of its own, marked, and left out
of recall (SPEC section 20)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from boxmaker import proto as p
from boxmaker.memory.sources import session_names

from ..helpers import read_log
from ..processes import BIN, Process
from .test_fixtures import FIXTURES

# The fenced profile's model answers with a tool block for the first message (the same call
# as recorded: its recorded result is used), a tool the recording never called for the
# second (not run), and plain words otherwise.
SCRIPT = {
    "replies": [
        {"content": '```tool\n{"name": "echo", "arguments": {"text": "hi"}}\n```'},
        {"content": "It said hi."},
        {"content": '```tool\n{"name": "echo", "arguments": {"text": "never"}}\n```'},
        {"content": "Not run, then."},
    ],
    "default": {"content": "Fine."},
}


def test_with_another_profile_sets_the_two_conversations_side_by_side(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "replay-tools", home / "sessions" / "replay-tools")
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    env = {**os.environ, "BOXMAKER_HOME": str(home), "NO_COLOR": "1"}
    fake = Process(
        [str(BIN / "python"), "-m", "boxmaker.testing", "--script",
         str(tmp_path / "script.json"), "--n-ctx", "100000"],
        env, tmp_path,
    )  # fmt: skip
    try:
        url = fake.out.wait_for("listening on").split()[-1]
        (tmp_path / "system.md").write_text("You are Boxmaker, in a test.")
        config = tmp_path / "config.toml"
        config.write_text(
            f'[server]\nbase_url = "{url}"\n[paths]\nhome = "{home}"\n'
            f'[baseline]\nsystem = "{tmp_path / "system.md"}"\n'
        )
        result = subprocess.run(
            [BIN / "bxctl", "replay", "replay-tools", "--config", str(config),
             "--with", "profile=smollm2-135m", "--json"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        fake.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["session"] == "replay-tools"
    assert report["with"] == "profile=smollm2-135m"
    turns = report["turns"]
    assert [t["message"] for t in turns] == ["Echo hi.", "What time is it?", "Echo a, then b."]
    first, second = turns[0], turns[1]
    assert first["recorded"]["tools"] == ["call_tool"]  # natively, through call_tool
    assert first["recorded"]["answer"] == "It said hi."
    assert first["what_if"]["answer"] == "It said hi."
    assert first["what_if"]["tools"] == ["echo"]  # a tool block of the fenced profile
    assert first["what_if"]["outcome"] == "done"
    assert second["what_if"]["answer"] == "Not run, then."
    made = home / "sessions" / report["what_if"]
    records = read_log(made / "0.jsonl")
    start = records[0]
    assert isinstance(start, p.SessionStartRecord)
    assert start.what_if == p.SessionId("replay-tools")
    results = [r for r in records if isinstance(r, p.ToolResultRecord)]
    assert results[0].content == "hi"  # the recorded result of the same call
    assert results[1].content.startswith("Not run: this conversation is a replay")
    assert session_names(home) == ["replay-tools"]  # the what-if is left out of recall
    shown = subprocess.run(
        [BIN / "bxctl", "replay", "replay-tools", "--config", str(config), "--with",
         "server=nowhere"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 2
    assert "no server named nowhere" in shown.stderr
