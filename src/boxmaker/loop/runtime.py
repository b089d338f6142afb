"""What a turn needs besides its session, shared by the turn and the epoch switch."""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from ..clock import Clock
from ..config import Config
from ..infer import Client, Servers
from ..proto import TurnEvent
from ..tools import Registry, ToolPort
from .cache_cause import LossWatch

__all__ = ["OnTurnEvent", "Runtime"]

OnTurnEvent = Callable[[TurnEvent], None]


@frozen
class Runtime:
    """What a turn needs besides the session."""

    config: Config
    client: Client | Servers
    port: ToolPort
    registry: Registry
    clock: Clock
    watch: LossWatch | None = None  # the daemon's view of the server, for a loss's cause

    def client_of(self, slot: str) -> Client:
        """The client of the server logical `slot` is on (its context, its tokenizer).

        Raises:
            InferError: `[slots]` no longer names `slot` (several servers only).
        """
        client = self.client
        return client.client_of(slot) if isinstance(client, Servers) else client
