"""Who may speak, and what each thing heard asks of the gateway (SPEC section 18). Pure.

Only the owners' messages drive turns or answer questions; anyone else's cost no call to
loopd and are told once per room that this agent answers only its owner. An invitation is
taken only from an owner; a room with a member who is neither an owner nor the gateway is
left (or, with `allow_shared_rooms`, only the owners count in it), and so is a room anyone
may join or whose history anyone may read; an encrypted room is told once and left. An edit
of a message never runs it again (docs/decisions.md). An owner's file or image is fetched
(`Attach`) unless it says it is larger than loopd takes; its caption, if any, is held to the
size of a message (`sent_files` says what becomes of it).
"""

from __future__ import annotations

from attrs import frozen

from ..proto import Answer
from .port import Encrypted, Exposed, Heard, Invited, Joined, Reacted, Said, Sent, Unreadable
from .words import COMMANDS, answer_in, file_name

__all__ = [
    "Act",
    "AnswerQuestion",
    "Attach",
    "Command",
    "Decline",
    "Ignore",
    "Join",
    "Leave",
    "Refuse",
    "Run",
    "TellStranger",
    "decide",
]


@frozen
class Ignore:
    pass


@frozen
class TellStranger:
    room: str


@frozen
class Join:
    room: str


@frozen
class Decline:
    """An invitation not taken (it is left: `leave` declines it)."""

    room: str
    inviter: str


@frozen
class Leave:
    room: str
    why: str  # said in the room first; "" to say nothing


@frozen
class Refuse:
    """An owner's event that runs nothing: `why` is the reply."""

    room: str
    event_id: str
    why: str


@frozen
class Command:
    room: str
    event_id: str
    name: str  # one of COMMANDS


@frozen
class Run:
    room: str
    event_id: str
    text: str
    at: int = 0  # when the homeserver took it (ms): which waiting files it takes


@frozen
class Attach:
    """An owner's file or image to fetch and bring to loopd: with a caption, a message of its
    own; without, it waits for the next."""

    room: str
    event_id: str
    file: Sent


@frozen
class AnswerQuestion:
    """An owner's answer to the question posted as `question`."""

    room: str
    event_id: str
    question: str
    answer: Answer | None  # None: words that are no answer


Act = (
    Ignore | TellStranger | Join | Decline | Leave | Refuse | Command | Run | Attach
    | AnswerQuestion
)  # fmt: skip

ENCRYPTED = (
    "This room is encrypted, and this agent cannot read encrypted rooms yet, so it is leaving. "
    "Start a room without encryption to talk to it (the README says how)."
)
SHARED = "This agent answers only its owner, and does not stay in rooms shared with others."
EXPOSED = (
    "This agent does not stay in a room where {}: its conversation is its owner's alone. Make "
    "the room invite-only, its history for members only, and invite it again."
)


def decide(
    heard: Heard, owners: frozenset[str], me: str, *, questions: frozenset[str],
    shared_rooms: bool, max_bytes: int, max_file_bytes: int,
) -> Act:  # fmt: skip
    """What `heard` asks for. `questions`: the ids of the questions the gateway posted that
    still wait; `max_bytes`: of a message's text; `max_file_bytes`: of a file (`[files]
    max_bytes`)."""
    if isinstance(heard, Invited):
        return Join(heard.room) if heard.sender in owners else Decline(heard.room, heard.sender)
    if isinstance(heard, Encrypted):
        return Leave(heard.room, ENCRYPTED)
    if isinstance(heard, Exposed):
        return Ignore() if shared_rooms else Leave(heard.room, EXPOSED.format(heard.why))
    if isinstance(heard, Joined):
        if heard.user in owners or heard.user == me or shared_rooms:
            return Ignore()
        return Leave(heard.room, SHARED)
    if heard.sender not in owners:
        return TellStranger(heard.room)
    if isinstance(heard, Reacted):
        if heard.target not in questions:
            return Ignore()
        return AnswerQuestion(heard.room, heard.event_id, heard.target, answer_in(heard.key))
    if isinstance(heard, Unreadable):
        why = (
            f"This agent reads text messages, files and images, and this was {heard.what}: "
            "nothing ran."
        )
        return Refuse(heard.room, heard.event_id, why)
    if isinstance(heard, Sent):
        return _sent(heard, max_bytes, max_file_bytes)
    return _said(heard, questions, max_bytes)


def _too_long(room: str, event_id: str, size: int, max_bytes: int) -> Refuse:
    why = (
        f"This message is {size:,} bytes, over the {max_bytes:,} this agent takes "
        "([gateway] max_message_bytes): nothing ran. Send it shorter, or in parts."
    )
    return Refuse(room, event_id, why)


def _sent(sent: Sent, max_bytes: int, max_file_bytes: int) -> Act:
    if sent.size is not None and sent.size > max_file_bytes:
        why = (
            f"{file_name(sent.name)} is {sent.size:,} bytes, over the {max_file_bytes:,} "
            "this agent takes ([files] max_bytes): it was not fetched, and nothing ran."
        )
        return Refuse(sent.room, sent.event_id, why)
    if sent.caption is not None and (size := len(sent.caption.encode())) > max_bytes:
        return _too_long(sent.room, sent.event_id, size, max_bytes)
    return Attach(sent.room, sent.event_id, sent)


def _said(said: Said, questions: frozenset[str], max_bytes: int) -> Act:
    if said.edits is not None:
        why = "An edit does not run a message again; send it anew to ask again."
        return Refuse(said.room, said.event_id, why)
    if said.reply_to is not None and said.reply_to in questions:
        answer = answer_in(said.text)
        return AnswerQuestion(said.room, said.event_id, said.reply_to, answer)
    size = len(said.text.encode())
    if size > max_bytes:
        return _too_long(said.room, said.event_id, size, max_bytes)
    if not said.text.strip():
        return Ignore()
    word = said.text.strip().lower()
    if word in COMMANDS:
        return Command(said.room, said.event_id, word)
    return Run(said.room, said.event_id, said.text, said.at)
