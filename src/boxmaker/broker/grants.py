"""The tools the owner allowed for one session's life (`session` answers), kept on disk by
brokerd so that a restart keeps them: `<home>/broker/grants/<session>.json`, a JSON list of
tool names, replaced atomically. A file that cannot be read is no grant (and logged)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from ..proto import DecodeError, SessionId, encode, parse_json

__all__ = ["SessionGrants"]

log = logging.getLogger("brokerd")

MOST_BYTES = 64 * 1024


class SessionGrants:
    def __init__(self, path_of: Callable[[str], Path]) -> None:
        self._path_of = path_of
        self._known: dict[SessionId, frozenset[str]] = {}

    def of(self, session: SessionId) -> frozenset[str]:
        """The tools allowed for `session` (read from disk once, then kept)."""
        if session not in self._known:
            self._known[session] = self._read(self._path_of(session.value))
        return self._known[session]

    def add(self, session: SessionId, tool: str) -> None:
        """Allow `tool` for the rest of `session`'s life (durably, before it runs)."""
        tools = self.of(session) | {tool}
        path = self._path_of(session.value)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        try:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, encode(sorted(tools)) + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(partial, path)
        except BaseException:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        self._known[session] = tools

    @staticmethod
    def _read(path: Path) -> frozenset[str]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return frozenset()
        except OSError as error:
            log.warning("%s: cannot read the session's grants: %s; none are held", path, error)
            return frozenset()
        try:
            data = os.read(fd, MOST_BYTES + 1)
        finally:
            os.close(fd)
        try:
            names = parse_json(data) if len(data) <= MOST_BYTES else None
        except DecodeError:
            names = None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            log.warning("%s: not a list of tool names; no session grant is held", path)
            return frozenset()
        return frozenset(names)
