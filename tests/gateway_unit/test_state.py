"""The gateway's files (`gatewayd.state`, `gatewayd.token`): written whole, 0600, read back;
a damaged state refused by name; a token kept only for its own user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from boxmaker.gatewayd.sent_files import SentFile
from boxmaker.gatewayd.state import HANDLED, Pending, Room, State, StateDamaged, session_for
from boxmaker.gatewayd.token import TokenFile
from boxmaker.proto import FileOffer, SessionId


def test_the_state_round_trips_0600(tmp_path: Path) -> None:
    state = State(tmp_path)
    state.load()
    state.saved.position = "s9"
    state.rooms["!r:hs"] = Room((session_for("!r:hs"),), created=True)
    state.pending["$1"] = Pending("!r:hs", session_for("!r:hs"), "hello")
    state.save()
    assert stat.S_IMODE(os.stat(state.path).st_mode) == 0o600
    again = State(tmp_path)
    again.load()
    assert again.saved == state.saved
    assert again.sessions() == (session_for("!r:hs"),)
    assert again.room_of(session_for("!r:hs")) == "!r:hs"


def test_files_that_wait_and_a_message_s_files_are_kept(tmp_path: Path) -> None:
    photo = SentFile("$p", "mxc://hs/p", FileOffer("p.png", "image/png", 9, "a" * 64), 17)
    notes = SentFile("$n", "mxc://hs/n", FileOffer("n.md", "text/markdown", 3, "b" * 64))
    state = State(tmp_path)
    state.load()
    state.rooms["!r:hs"] = Room(("mx-1",), created=True, waiting=(photo,))
    state.pending["$1"] = Pending("!r:hs", "mx-1", "Read these.", files=(notes, photo))
    state.save()
    again = State(tmp_path)
    again.load()
    assert again.saved == state.saved
    # A state written before files: read as none waiting.
    state.path.write_text(
        '{"position":"s1","rooms":{"!r:hs":{"sessions":["mx-1"],"created":true,'
        '"told_stranger":false}},"pending":{"$1":{"room":"!r:hs","session":"mx-1",'
        '"text":"hi","joined":null,"joined_reply":null}},"handled":[],"questions":{}}'
    )
    older = State(tmp_path)
    older.load()
    assert older.rooms["!r:hs"] == Room(("mx-1",), created=True)
    assert older.pending["$1"] == Pending("!r:hs", "mx-1", "hi")


def test_a_damaged_state_is_refused_by_name(tmp_path: Path) -> None:
    state = State(tmp_path)
    state.load()
    state.path.write_text('{"position": 5}')
    os.chmod(state.path, 0o600)
    with pytest.raises(StateDamaged, match=r"state\.json"):
        State(tmp_path).load()


def test_handled_ids_are_bounded(tmp_path: Path) -> None:
    state = State(tmp_path)
    for n in range(HANDLED + 10):
        state.mark_handled(f"${n}")
    assert len(state.saved.handled) == HANDLED
    assert state.handled(f"${HANDLED + 9}")
    assert not state.handled("$0")


def test_a_room_s_sessions_are_valid_ids() -> None:
    for room in ("!abc:hs", "!" + "x" * 300 + ":hs", "!é/../..:hs"):
        assert str(SessionId(session_for(room))) == session_for(room)
        assert str(SessionId(session_for(room, 7))).endswith("-7")
    assert session_for("!a:hs") != session_for("!b:hs")


def test_the_token_is_kept_0600_for_its_user(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path)
    assert tokens.read("@bot:hs") is None
    tokens.write("@bot:hs", "secret-token", "DEV")
    assert stat.S_IMODE(os.stat(tokens.path).st_mode) == 0o600
    assert tokens.read("@bot:hs") == "secret-token"
    assert tokens.read("@other:hs") is None
    os.chmod(tokens.path, 0o644)  # another user could read it: not used
    assert tokens.read("@bot:hs") is None
