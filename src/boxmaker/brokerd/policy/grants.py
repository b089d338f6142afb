"""The tools the owner allowed for one session's life (`session` answers), kept on disk by
brokerd so that a restart keeps them: `<home>/broker/grants/<session>.json`, a JSON object
`{"identity": <the session's identity>, "tools": [names]}`, replaced atomically. They hold for
that identity alone: a new session under a removed one's id (another identity) holds none of
them, and its first answer replaces the file. A file that cannot be read is no grant (and
logged); a list of names (before identities) holds for no session.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from ...proto import DecodeError, SessionId, encode, parse_json
from ...store import FileSystem

__all__ = ["SessionGrants"]

log = logging.getLogger("brokerd")

MOST_BYTES = 64 * 1024


class SessionGrants:
    def __init__(self, path_of: Callable[[str], Path]) -> None:
        self._path_of = path_of
        self._known: dict[SessionId, tuple[str, frozenset[str]]] = {}

    def of(self, session: SessionId, identity: str) -> frozenset[str]:
        """The tools allowed for `session` as it is now (`identity`), read from disk once."""
        if session not in self._known:
            self._known[session] = self._read(self._path_of(session.value))
        held, tools = self._known[session]
        return tools if held == identity else frozenset()

    def add(self, session: SessionId, identity: str, tool: str) -> None:
        """Allow `tool` for the rest of `session`'s life (durably, before it runs)."""
        tools = self.of(session, identity) | {tool}
        path = self._path_of(session.value)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = encode({"identity": identity, "tools": sorted(tools)}) + b"\n"
        FileSystem().replace_file(path, data)
        self._known[session] = (identity, tools)

    def end(self, session: SessionId, identity: str = "") -> None:
        """`session` (as `identity`; "": whichever) was removed: its grants end (their file
        deleted), unless they are another identity's (a session made again under the id)."""
        held, _tools = self._known.get(session) or self._read(self._path_of(session.value))
        if identity and held not in (identity, "\0"):
            return
        self._known.pop(session, None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path_of(session.value))

    @staticmethod
    def _read(path: Path) -> tuple[str, frozenset[str]]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return "", frozenset()
        except OSError as error:
            log.warning("%s: cannot read the session's grants: %s; none are held", path, error)
            return "", frozenset()
        try:
            data = os.read(fd, MOST_BYTES + 1)
        finally:
            os.close(fd)
        try:
            held = parse_json(data) if len(data) <= MOST_BYTES else None
        except DecodeError:
            held = None
        if isinstance(held, list):  # before identities: no session's for sure
            return "\0", frozenset()
        identity = held.get("identity") if isinstance(held, dict) else None
        names = held.get("tools") if isinstance(held, dict) else None
        if (
            not isinstance(identity, str)
            or not isinstance(names, list)
            or not all(isinstance(n, str) for n in names)
        ):
            log.warning("%s: not a session's grants; none is held", path)
            return "\0", frozenset()
        return identity, frozenset(names)
