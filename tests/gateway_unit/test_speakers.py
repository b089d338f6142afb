"""Who may speak (`gatewayd.speakers.decide`): only the owners' events run turns or answer
questions; invitations only from an owner; shared and encrypted rooms left."""

from __future__ import annotations

from boxmaker.gatewayd.port import Encrypted, Invited, Joined, Reacted, Said, Unreadable
from boxmaker.gatewayd.speakers import (
    ENCRYPTED,
    SHARED,
    AnswerQuestion,
    Command,
    Decline,
    Ignore,
    Join,
    Leave,
    Refuse,
    Run,
    TellStranger,
    decide,
)
from boxmaker.proto import Answer

OWNER, ME, STRANGER = "@owner:hs", "@bot:hs", "@eve:hs"
QUESTION = "$question"


def act(heard: object, shared: bool = False, max_bytes: int = 100) -> object:
    return decide(
        heard, frozenset({OWNER}), ME, questions=frozenset({QUESTION}), shared_rooms=shared,
        max_bytes=max_bytes, max_file_bytes=1000,
    )  # type: ignore[arg-type]  # fmt: skip


def test_only_the_owner_s_message_runs() -> None:
    assert act(Said("!r", OWNER, "$1", "hello")) == Run("!r", "$1", "hello")
    assert act(Said("!r", STRANGER, "$2", "hello")) == TellStranger("!r")
    assert act(Said("!r", ME, "$3", "hello")) == TellStranger("!r")  # never answers itself


def test_only_the_owner_answers_a_question() -> None:
    assert act(Said("!r", OWNER, "$1", "y", reply_to=QUESTION)) == AnswerQuestion(
        "!r", "$1", QUESTION, Answer.ONCE
    )
    assert act(Said("!r", STRANGER, "$1", "y", reply_to=QUESTION)) == TellStranger("!r")
    assert act(Reacted("!r", OWNER, "$1", QUESTION, "👍️")) == AnswerQuestion(
        "!r", "$1", QUESTION, Answer.ONCE
    )
    assert act(Reacted("!r", OWNER, "$1", QUESTION, "❌")) == AnswerQuestion(
        "!r", "$1", QUESTION, Answer.DENY
    )
    assert act(Reacted("!r", STRANGER, "$1", QUESTION, "👍")) == TellStranger("!r")
    assert act(Reacted("!r", OWNER, "$1", "$other", "👍")) == Ignore()
    assert act(Said("!r", OWNER, "$1", "perhaps", reply_to=QUESTION)) == AnswerQuestion(
        "!r", "$1", QUESTION, None
    )
    # a reply to anything else is a message
    assert act(Said("!r", OWNER, "$1", "y", reply_to="$old")) == Run("!r", "$1", "y")


def test_invitations_only_from_an_owner() -> None:
    assert act(Invited("!r", OWNER)) == Join("!r")
    assert act(Invited("!r", STRANGER)) == Decline("!r", STRANGER)


def test_a_room_with_a_stranger_is_left_unless_shared_rooms_are_allowed() -> None:
    assert act(Joined("!r", STRANGER)) == Leave("!r", SHARED)
    assert act(Joined("!r", STRANGER), shared=True) == Ignore()
    assert act(Joined("!r", OWNER)) == Ignore()
    assert act(Joined("!r", ME)) == Ignore()


def test_an_encrypted_room_is_left() -> None:
    assert act(Encrypted("!r")) == Leave("!r", ENCRYPTED)
    assert act(Encrypted("!r"), shared=True) == Leave("!r", ENCRYPTED)


def test_commands_edits_sizes_and_what_cannot_be_read() -> None:
    assert act(Said("!r", OWNER, "$1", " !NEW ")) == Command("!r", "$1", "!new")
    assert act(Said("!r", OWNER, "$1", "!stop")) == Command("!r", "$1", "!stop")
    assert act(Said("!r", OWNER, "$1", "!other")) == Run("!r", "$1", "!other")
    edit = act(Said("!r", OWNER, "$1", "again", edits="$0"))
    assert isinstance(edit, Refuse)
    assert "edit" in edit.why
    big = act(Said("!r", OWNER, "$1", "é" * 50 + "x"))  # 101 bytes
    assert isinstance(big, Refuse)
    assert "101 bytes, over the 100" in big.why
    assert act(Said("!r", OWNER, "$1", "é" * 50)) == Run("!r", "$1", "é" * 50)
    assert act(Said("!r", OWNER, "$1", "  \n")) == Ignore()
    image = act(Unreadable("!r", OWNER, "$1", "a message of type m.image"))
    assert isinstance(image, Refuse)
    assert "m.image" in image.why
    assert act(Unreadable("!r", STRANGER, "$1", "x")) == TellStranger("!r")
