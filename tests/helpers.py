"""Small helpers shared by the tests."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import trio

from boxmaker import proto as p
from boxmaker.config import Config, parse_config


def make_config(text: str = "", home: Path = Path("/nonexistent/home")) -> Config:
    """A config parsed from `text`, as if it sat in `/etc/boxmaker/`."""
    return parse_config(text, Path("/etc/boxmaker/config.toml"), {"BOXMAKER_HOME": str(home)})


class EventLog:
    """An `on_event` callback that keeps every event and lets a test wait for a kind."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self._seen: defaultdict[type, trio.Event] = defaultdict(trio.Event)

    def __call__(self, event: object) -> None:
        self.events.append(event)
        self._seen[type(event)].set()

    async def wait_for(self, kind: type) -> None:
        await self._seen[kind].wait()

    def of(self, kind: type) -> list[object]:
        return [e for e in self.events if isinstance(e, kind)]

    def text(self, kind: type = p.Content) -> str:
        return "".join(e.text for e in self.events if isinstance(e, kind))  # type: ignore[attr-defined]
