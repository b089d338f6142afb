"""What a turn needs besides its session, shared by the turn and the epoch switch."""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from ..clock import Clock
from ..config import Config
from ..infer import Client
from ..proto import TurnEvent
from ..tools import Registry, ToolPort

__all__ = ["OnTurnEvent", "Runtime"]

OnTurnEvent = Callable[[TurnEvent], None]


@frozen
class Runtime:
    """What a turn needs besides the session."""

    config: Config
    client: Client
    port: ToolPort
    registry: Registry
    clock: Clock
