"""The bot's access token, kept after a password login in `<home>/gateway/token.json` (0600,
this user's alone, never followed through a link), so the password is used once. A kept
token another user could read is not used: the gateway signs in again and replaces it."""

from __future__ import annotations

import os
from pathlib import Path

from attrs import frozen

from .. import layout
from ..proto import DecodeError, dumps, loads
from ..session import SessionError
from ..store import FileSystem

__all__ = ["TokenFile"]


@frozen
class Kept:
    user_id: str
    access_token: str
    device_id: str


class TokenFile:
    def __init__(self, home: Path) -> None:
        self.path = layout.gateway_folder(home) / "token.json"
        self._fs = FileSystem()

    def read(self, user_id: str) -> str | None:
        """The kept token of `user_id`; None when there is none (or it is not one)."""
        try:
            data = self._fs.read_if_there(self.path)
            kept = loads(Kept, data) if data is not None else None
            if kept is not None and os.stat(self.path).st_mode & 0o077:
                return None  # others could read it: a token to replace, not to use
        except (DecodeError, SessionError, OSError):
            return None
        return kept.access_token if kept is not None and kept.user_id == user_id else None

    def write(self, user_id: str, token: str, device: str) -> None:
        self._fs.makedirs(self.path.parent)
        self._fs.replace_file(self.path, dumps(Kept(user_id, token, device)) + b"\n", mode=0o600)
