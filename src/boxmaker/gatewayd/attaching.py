"""The owner's files brought to loopd (SPEC section 22, docs/protocol.md "Files in a turn"):
each fetched from the network, at most `[files] max_bytes` of it, then attached as `bxctl`'s
`/attach` does (`client.attach`, on a connection of its own); loopd checks it and keeps it for
the turn that names it. What becomes of a file in its room is `sent_files`'.

loopd keeps an attached file only for its own life and an hour, so a turn's files are
attached again before it is sent when loopd may have lost them: the watch on loopd was lost
since (loopd went away: `lost`), the gateway started since, or it was attached more than
`AGAIN_S` ago. Then the bytes are fetched again and must be the ones sent (their hash).

The media type given to loopd is the one declared, in lower case without its parameters; when
none is declared, or `application/octet-stream` (a client's "I do not know"), the one
`attached.media_type_of` guesses from the name and the bytes (`media_type_for`). loopd checks
the bytes against it either way.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
from attrs import frozen

from ..attached import OCTET_STREAM, media_type_of
from ..client import ChannelError, attach, offer_of
from ..proto import AttachedFrame, FileOffer, InvalidValue, WireError
from .matrix import FileTooLarge, Refused, Unreachable
from .port import Network
from .retry import patiently
from .sent_files import SentFile
from .words import file_name, visible

__all__ = ["AGAIN_S", "FETCH_TRIES", "Attacher", "NotTaken", "media_type_for"]

log = logging.getLogger("gatewayd")

FETCH_TRIES = 5  # a homeserver that cannot give a file this many times over: told
AGAIN_S = 1800.0  # half loopd's hour: a file attached longer ago is attached again

_ESSENCE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")

Away = Callable[[str, str], Awaitable[None]]  # (room, why): wait while loopd is away


@frozen
class NotTaken:
    """A file the owner is told was not taken, and why (in words)."""

    why: str


def media_type_for(declared: str | None, name: str, data: bytes) -> str:
    """The media type to give loopd for a file named `name` of `data`, declared `declared`."""
    essence = (declared or "").partition(";")[0].strip().lower()
    if _ESSENCE.fullmatch(essence) and essence != OCTET_STREAM:
        return essence
    return media_type_of(name, data)


class Attacher:
    """Brings files to loopd at `socket`, fetched from `network`; `away` is waited on while
    loopd cannot be reached."""

    def __init__(self, network: Network, socket: Path, max_bytes: int, away: Away) -> None:
        self.network = network
        self.socket = socket
        self.max_bytes = max_bytes
        self.away = away
        self.generation = 0  # one more each time loopd went away
        self._attached: dict[str, float] = {}  # sha256 -> when attached (trio's clock)

    def lost(self) -> None:
        """loopd went away: what was attached went with it."""
        self.generation += 1
        self._attached.clear()

    async def bring(
        self, room: str, source: str, name: str, declared: str | None, sha256: str | None = None
    ) -> FileOffer | NotTaken:
        """Fetch the file at `source` and attach it (waiting while loopd is away): what a
        turn frame names of it, or why it was not taken. `sha256`: the hash its bytes must
        have (a file attached again; `declared` is then the media type it was given)."""
        shown = file_name(name)
        try:
            data = await patiently(
                lambda: self.network.download(source, self.max_bytes), "a file", FETCH_TRIES
            )
        except FileTooLarge as error:
            return NotTaken(
                f"{shown} is over the {error.most:,} bytes this agent takes ([files] "
                "max_bytes): it was not taken, and nothing ran."
            )
        except (Refused, Unreachable) as error:
            log.warning("fetching %s: %s", source[:100], error)
            return NotTaken(
                f"{shown} could not be fetched from the homeserver ({visible(str(error))}): "
                "it was not taken, and nothing ran."
            )
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            return NotTaken(f"{shown} is not what it was when it was sent: it was not taken.")
        media_type = declared if sha256 is not None and declared else None
        try:
            offer = offer_of(name, media_type or media_type_for(declared, name, data), data)
        except InvalidValue as error:  # a name or a type a FileOffer will not take
            return NotTaken(f"{shown} was not taken: {visible(str(error))}")
        while True:
            try:
                answer = await attach(self.socket, offer, data)
            except ChannelError as error:
                await self.away(room, str(error))
                continue
            if isinstance(answer, AttachedFrame):
                self._attached[offer.sha256] = trio.current_time()
                log.info("attached %s (%s, %d bytes)", offer.sha256[:12], answer.kind, offer.size)
                return offer
            said = answer.message if isinstance(answer, WireError) else type(answer).__name__
            return NotTaken(f"{shown} was not taken: {visible(said, 600)}")

    async def ready(self, room: str, files: tuple[SentFile, ...]) -> NotTaken | None:
        """Each of `files` attached in loopd now (again, when it may have lost it), or why
        one could not be."""
        for file in files:
            when = self._attached.get(file.offer.sha256)
            if when is not None and trio.current_time() - when < AGAIN_S:
                continue
            offer = file.offer
            log.info("attaching %s again for its turn", offer.sha256[:12])
            again = await self.bring(room, file.source, offer.name, offer.media_type, offer.sha256)
            if isinstance(again, NotTaken):
                return again
        return None
