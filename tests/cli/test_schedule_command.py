"""`bxctl schedule`: schedules added, listed with their next time, paused, resumed and
cancelled in their file; a wrong `when`, zone or session an error with nothing written; a file
damaged in the middle refused naming the file and the line (here and in `bxctl verify`); a
write cut short set aside by the next one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.cli.bxctl import main
from boxmaker.clock import TickingClock
from boxmaker.layout import torn_name
from boxmaker.schedules import schedules_file
from boxmaker.session import assemble_baseline
from boxmaker.store import Store

from ..helpers import SYSTEM
from ..processes import BIN


def bxctl(home: Path, *words: str) -> tuple[int, str, str]:
    result = subprocess.run(
        [BIN / "bxctl", *words, "--home", str(home)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    return result.returncode, result.stdout, result.stderr


def run(home: Path, capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    code = main(["schedule", *words, "--home", str(home)])
    said = capsys.readouterr()
    return code, said.out, said.err


@pytest.fixture
def home(tmp_path: Path) -> Path:
    Store(tmp_path, TickingClock()).create(p.SessionId("chat-1"), assemble_baseline(SYSTEM, None),
                                           "main").close()  # fmt: skip
    return tmp_path


def test_schedules_are_added_listed_paused_resumed_and_cancelled(home: Path) -> None:
    # The whole command once as a person runs it; the rest in process.
    assert bxctl(home, "schedule", "add", "0 7 * * *", "Tell me the news.", "--session",
                 "chat-1", "--tz", "Europe/Paris") == (
        0, "scheduled s1: cron 0 7 * * * (Europe/Paris)\n", "")  # fmt: skip
    code, out, _ = bxctl(home, "schedule", "ls")
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["ID", "WHEN", "TZ", "SESSION", "NEXT", "LAST", "MESSAGE"]
    assert row.split()[:7] == ["s1", "cron", "0", "7", "*", "*", "*"]
    assert row.split()[7:] == ["Europe/Paris", "chat-1", row.split()[9], "07:00:00", "-",
                               "Tell", "me", "the", "news."]  # fmt: skip


def test_pause_resume_rm_and_the_json_lines(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, capsys, "add", "every 2h", "Look.", "--new-session")[0] == 0
    assert run(home, capsys, "pause", "s1") == (0, "paused s1\n", "")
    assert run(home, capsys, "pause", "s1") == (1, "", "error: schedule s1 is paused already\n")
    assert "paused" in run(home, capsys, "ls")[1]
    assert run(home, capsys, "resume", "s1") == (0, "resumed s1\n", "")
    assert run(home, capsys, "rm", "s1") == (0, "cancelled s1\n", "")
    assert run(home, capsys, "rm", "s1")[2].startswith("error: schedule s1 was cancelled at ")
    assert run(home, capsys, "ls")[2].startswith("no schedules in ")
    assert "cancelled " in run(home, capsys, "ls", "--all")[1]
    lines = [json.loads(line) for line in run(home, capsys, "ls", "--json")[1].splitlines()]
    assert [line["type"] for line in lines] == ["schedule", "pause", "resume", "cancel"]
    assert lines[0]["new_session"] is True
    assert lines[0]["created_by"] == "owner"


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["every 0 minutes", "x", "--new-session"], "an interval is from 1 second"),
        (["at 2020-01-01T09:00", "x", "--new-session"], "that time is past"),
        (["0 7 * * *", "x", "--new-session", "--tz", "Mars/Base"], "not a time zone"),
        (["0 7 * * *", "x", "--session", "nobody"], "there is no session nobody"),
        (["0 7 * * *", "x", "--session", "../chat-1"], "session id '../chat-1' has a '/'"),
        (["0 7 * * *", "", "--new-session"], "the message is empty"),
    ],
)
def test_a_wrong_schedule_is_an_error_with_nothing_written(
    home: Path, capsys: pytest.CaptureFixture[str], words: list[str], said: str
) -> None:
    code, out, err = run(home, capsys, "add", *words)
    assert (code, out) == (1, "")
    assert said in err
    assert schedules_file(home).read() == ()


def test_the_message_and_the_count_are_bounded_by_the_config(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = home / "config.toml"
    config.write_text("[schedules]\nmax_schedules = 1\nmax_message_chars = 5\n")
    add = ["add", "every 1h", "--new-session", "--config", str(config)]
    assert "max_message_chars" in run(home, capsys, *add[:2], "longer", *add[2:])[2]
    assert run(home, capsys, *add[:2], "short", *add[2:])[0] == 0
    assert "max_schedules" in run(home, capsys, *add[:2], "again", *add[2:])[2]


def test_a_damaged_file_is_refused_naming_the_file_and_the_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(3):
        run(home, capsys, "add", "every 1h", f"Message {n}.", "--new-session")
    path = schedules_file(home).path
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"Message 1.", b"Message 9.")
    path.write_bytes(b"".join(lines))
    code, _, err = run(home, capsys, "ls")
    assert code == 1
    assert f"{path}, line 2: hash_mismatch: " in err
    code, _, err = run(home, capsys, "add", "every 1h", "More.", "--new-session")
    assert code == 1
    assert f"{path}, line 2" in err
    assert path.read_bytes() == b"".join(lines)  # nothing written
    assert main(["verify", "--home", str(home)]) == 1
    assert f"FAIL schedules.jsonl: {path}, line 2" in capsys.readouterr().out


def test_a_write_cut_short_is_left_out_then_set_aside(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(home, capsys, "add", "every 1h", "Whole.", "--new-session")
    path = schedules_file(home).path
    whole = path.read_bytes()
    with path.open("ab") as file:
        file.write(b'{"type":"cancel","time":')
    assert len(schedules_file(home).read()) == 1
    assert main(["verify", "--home", str(home)]) == 0
    assert "ok   schedules.jsonl: 1 records, chained" in capsys.readouterr().out
    assert run(home, capsys, "add", "every 2h", "Next.", "--new-session")[0] == 0
    aside = path.with_name(torn_name(path.name, len(whole)))
    assert aside.read_bytes() == b'{"type":"cancel","time":'
    assert [r.id for r in schedules_file(home).read()] == ["s1", "s2"]


async def test_the_chat_shows_what_ran_since_the_owner_last_looked(tmp_path: Path) -> None:
    from boxmaker.cli.chat_command import since_last_looked
    from boxmaker.loopd.loop import run_turn
    from boxmaker.testing.fake_server import FakeLlamaServer, Reply

    from ..helpers import open_rig

    fake = FakeLlamaServer(default=Reply(content="Answered."))
    async with open_rig(tmp_path, fake, session="s1") as rig:
        for n in range(8):
            await run_turn(rig.session, rig.runtime, f"Message {n}.", lambda _e: None)
    sid = p.SessionId("s1")
    index = tmp_path / "sessions" / "s1" / "index.json"
    written = json.loads(index.read_text())
    assert written["shown"] == 0  # no person saw these (open_rig's store: not loopd's)
    index.write_text(json.dumps({**written, "shown": 6}))
    lines = since_last_looked(tmp_path, sid)
    assert lines[0] == "[2 turns ran since you last looked:]"
    assert lines[1:] == ["> Message 6.", "Answered.", "", "> Message 7.", "Answered.", ""]
    index.write_text(json.dumps({**written, "shown": 0}))
    lines = since_last_looked(tmp_path, sid)
    assert lines[0] == "[8 turns ran since you last looked; the last 5:]"
    assert lines[1] == "> Message 3."
    index.write_text(json.dumps({**written, "shown": 8}))
    assert since_last_looked(tmp_path, sid) == []
    del written["shown"]  # an index from before `shown`: nothing is said to be missed
    index.write_text(json.dumps(written))
    assert since_last_looked(tmp_path, sid) == []
