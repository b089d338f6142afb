"""gatewayd's status file, `<home>/run/gateway/status.json` (0600), which `bxctl gateway`
reads: whether the homeserver and loopd answer, and the rooms with their sessions. Written
when any of it changes; gone when gatewayd stops cleanly (a file left by a killed gatewayd
names its pid, which `bxctl gateway` finds not running)."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from .. import layout
from ..proto import encode
from ..store import FileSystem

__all__ = ["STATUS", "Status"]

STATUS = "status.json"

log = logging.getLogger("gatewayd")


class Status:
    def __init__(self, home: Path, homeserver: str, user_id: str) -> None:
        self.path = layout.gateway_run(home) / STATUS
        self.homeserver = homeserver
        self.user_id = user_id
        self._connected = False
        self._why = "not yet synced"
        self._changed = trio.Event()
        self._fs = FileSystem()

    def connected(self, connected: bool, why: str = "") -> None:
        if (connected, why) != (self._connected, self._why):
            self._connected, self._why = connected, why
            self._changed.set()

    def touch(self) -> None:
        self._changed.set()

    async def keep(self, shown: Callable[[], dict[str, Any]]) -> None:
        """Write the file now and whenever what it shows changes (looked at once a second,
        and when told)."""
        self._fs.makedirs(self.path.parent)
        try:
            last: dict[str, Any] = {}
            while True:
                now = self.shown() | shown()
                if now != last:
                    try:
                        data = encode(now | {"written": time.time()}) + b"\n"
                        self._fs.replace_file(self.path, data, sync=False)
                        last = now
                    except OSError as error:
                        log.warning("cannot write %s: %s", self.path, error.strerror or error)
                with trio.move_on_after(1.0):
                    await self._changed.wait()
                self._changed = trio.Event()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def shown(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "homeserver": self.homeserver,
            "user_id": self.user_id,
            "connected": self._connected,
            "problem": "" if self._connected else self._why[:300],
        }
