"""What a turn needs besides its session, shared by the turn and the epoch switch, and how a
turn writes to its session (`write`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio
from attrs import field, frozen

from ...clock import Clock
from ...config import Config
from ...proto import LogRecord, TurnEvent, TurnFile
from ...store import OpenSession
from ...tools import ToolPort
from ..cache import LossWatch
from ..infer import Client, Servers
from .approvals import Approvals

__all__ = ["Carried", "OnTurnEvent", "Runtime", "write"]

OnTurnEvent = Callable[[TurnEvent], None]


@frozen
class Carried:
    """The files a turn carries (SPEC section 22): as its `user` record names them, their
    text as the model gets it (after the owner's words), and what to keep in the session's
    folder before that record is written (by hash: each file, as the upload it is; each
    PDF's text or image's description, as its bytes)."""

    files: tuple[TurnFile, ...]
    attached: str
    keep: tuple[tuple[str, Path | bytes], ...]


@frozen
class Runtime:
    """What a turn needs besides the session."""

    config: Config
    client: Client | Servers
    port: ToolPort
    clock: Clock
    watch: LossWatch | None = None  # the daemon's view of the server, for a loss's cause
    approvals: Approvals = field(factory=Approvals)  # the calls waiting for the owner
    timer: Callable[[], float] = trio.current_time  # a turn's duration (`turn_end`'s `ms`)

    def client_of(self, slot: str) -> Client:
        """The client of the server logical `slot` is on (its context, its tokenizer).

        Raises:
            InferError: `[slots]` no longer names `slot` (several servers only).
        """
        client = self.client
        return client.client_of(slot) if isinstance(client, Servers) else client

    async def tier(self, purpose: str) -> tuple[Client, int | None] | None:
        """The client of `[tiers] <purpose>`'s server and its context in tokens (None: it
        could not say); None when no tier is set for it, or the runtime has one client (a
        test's, replay's, where the recording answers every request)."""
        servers = self.client
        if not isinstance(servers, Servers) or (client := servers.tier(purpose)) is None:
            return None
        return client, await servers.context_of(client.name)


async def write(session: OpenSession, *records: LogRecord, durable: bool = True) -> None:
    """Append `records` to the session (one write, in the event loop: a record is never cut
    half-way by a cancel), unless the turn was cancelled meanwhile: a cancel already pending is
    raised first, and nothing is written.

    Raises:
        SessionError: as `OpenSession.append` does.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    session.append(*records, durable=durable)
