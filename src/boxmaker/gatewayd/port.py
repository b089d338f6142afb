"""The port a chat network implements for the gateway (Matrix first): what the gateway hears,
as plain events of its own, and what it may do in a room. Everything past this port is the
network's; the gateway's rules (who may speak, rooms as sessions, exactly once) are not.

What is heard comes in batches, each with the network's position after it (Matrix's
`next_batch`): the gateway keeps a position only once each event before it is dealt with.
Each thing the gateway posts carries a `key` of its own making, derived from what it answers:
the network must post one message per key however often it is asked (Matrix's transaction
ids), so a gateway that crashes after a post and posts again posts once. Pure.
"""

from __future__ import annotations

from typing import Protocol

from attrs import frozen

__all__ = [
    "Batch",
    "Encrypted",
    "Exposed",
    "Heard",
    "Invited",
    "Joined",
    "Network",
    "Reacted",
    "Said",
    "Sent",
    "Unreadable",
]


@frozen
class Said:
    """A text message. `reply_to`: the message it answers; `edits`: the message it replaces
    (an edit); `text` is the new text for an edit, without a reply's quoted fallback."""

    room: str
    sender: str
    event_id: str
    text: str
    reply_to: str | None = None
    edits: str | None = None
    at: int = 0  # when the network took it, in ms since the epoch (0: not said)


@frozen
class Sent:
    """A file or an image. `source`: where the network's `download` fetches its bytes (checked
    when heard); `name`: a base name a `FileOffer` takes; `caption`: words sent with it (None
    for none); `media_type` and `size`: what the sender declared of it (None for nothing)."""

    room: str
    sender: str
    event_id: str
    source: str
    name: str
    caption: str | None = None
    media_type: str | None = None
    size: int | None = None
    at: int = 0


@frozen
class Reacted:
    """A reaction (`key`, an emoji) to the message `target`."""

    room: str
    sender: str
    event_id: str
    target: str
    key: str


@frozen
class Invited:
    """`sender` invited the gateway into `room`."""

    room: str
    sender: str


@frozen
class Joined:
    """`user` is a member of `room` (joined, or invited by someone)."""

    room: str
    user: str


@frozen
class Encrypted:
    """The room is end-to-end encrypted: the gateway reads none of it."""

    room: str


@frozen
class Exposed:
    """The room is open to people who are not its members: `why` says how (anyone may join
    it, or anyone may read its history without joining)."""

    room: str
    why: str


@frozen
class Unreadable:
    """A message the gateway cannot take (a voice message, an encrypted event or file, a shape
    it does not know): `what` names it for the owner."""

    room: str
    sender: str
    event_id: str
    what: str


Heard = Said | Sent | Reacted | Invited | Joined | Encrypted | Exposed | Unreadable


@frozen
class Batch:
    heard: tuple[Heard, ...]
    position: str  # where the next batch starts; kept once every event here is dealt with
    first: bool = False  # the first batch of a new position: old messages, not to be run
    gaps: tuple[str, ...] = ()  # rooms whose events since the last batch did not all come


class Network(Protocol):
    async def hear(self, position: str | None) -> Batch:
        """The next batch after `position` (None: from now on), waiting for one a bounded
        time (an empty batch then)."""

    async def post(
        self, room: str, text: str, *, key: str, html: str | None = None,
        reply_to: str | None = None, notice: bool = False,
    ) -> str:  # fmt: skip
        """Post `text` (and its HTML) once per `key`; the message's id."""

    async def edit(self, room: str, target: str, text: str, *, key: str, html: str | None) -> None:
        """Replace the text of the gateway's message `target`, once per `key`."""

    async def react(self, room: str, target: str, emoji: str, *, key: str) -> None: ...

    async def typing(self, room: str, on: bool) -> None: ...

    async def join(self, room: str) -> None: ...

    async def leave(self, room: str) -> None: ...

    async def download(self, source: str, most: int) -> bytes:
        """The bytes of the file at `source` (a `Sent`'s), at most `most` of them: one larger
        is refused (`TooLarge`) before more than `most` bytes are read."""
