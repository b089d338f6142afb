"""What loopd sees of llama-server between completions: which process it is, and which session
used each slot last. The facts behind a `cache_loss`'s cause (`loop/cache_cause.py`), and the
warnings when the server's settings cannot keep the sessions' prefixes: once at start from
`/props`, and once at the first loss that no restart explains (`/props` does not show
`--cache-ram`).

The server's start identity comes from `GET /props` (`media_marker` is drawn at random by each
server process; see docs/decisions.md). It is asked when loopd starts, after each loss, and
before a request while it is not known yet (a server still loading at loopd's start answers
503) or was last asked `FRESH_SECONDS` ago or more: so a restart while loopd ran is known
before the next turn's request, and said before its answer (`cache_cold`), while requests in
a row (a turn's completions, a busy loopd) never wait for it. Each change found
is a new *generation*; a session remembers the generation of its previous request, so every
session whose prefix a restart took is told so, not only the first to notice. The identity
last seen is kept in `<home>/run/server.json`, so a restart of both loopd and the server
(`make run` again) is still told from an eviction. The file is a hint: a missing, unreadable
or foreign one is ignored (the worst it can do is name the wrong cause). It is a few hundred
bytes, read and written in the event loop (a thread would cost more than the write, and would
let a test's virtual clock run on while it waits).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

import trio

from ..infer import Client, InferError, Servers
from ..infer.routes import ask
from ..loop.cache_cause import ServerIdentity, identity_of, settings_warnings
from ..proto import ChatMessage

__all__ = ["FRESH_SECONDS", "ServerWatch"]

log = logging.getLogger("loopd")

_MAX_STATE = 16 * 1024  # bytes read of server.json
FRESH_SECONDS = 1.0  # a request after this long without asking `/props` asks it first


class ServerWatch:
    """The daemon's `LossWatch`: the server's identity and who used each slot.

    Args:
        client: the shared client, or the servers (`/props` goes to the server of the first
            slot: with several servers, only that one's restarts are told).
        state: where the identity last seen is kept (None: nowhere).
    """

    def __init__(
        self, client: Client | Servers, state: Path | None, slot_ids: Sequence[int] = ()
    ) -> None:
        self._client = client
        self._state = state
        self._slot_ids = tuple(slot_ids)
        self._warned = False  # of losses with no restart: once per loopd
        self._started = False  # start() was called: loopd's watch, not a test's bare one
        self._identity: ServerIdentity | None = None
        self._generation = 0  # generation 0: the identity the state file names
        self._restarts: dict[int, str] = {}  # generation -> what told it
        self._seen: dict[str, int] = {}  # session -> generation at its latest request
        self._prior: dict[str, int] = {}  # session -> generation at the request before that
        self._users: dict[str, str] = {}  # slot -> session of its latest request
        self._taken: dict[str, str | None] = {}  # session -> who used its slot before it
        self.props: object = None  # the last `/props` answer read, for the settings check
        self._checked = -math.inf  # trio time of the last `/props` asked

    @property
    def identity(self) -> ServerIdentity | None:
        return self._identity

    async def start(self) -> None:
        """Read the identity last seen (by this loopd or one before it), then the server's."""
        self._started = True
        self._identity = _read_state(self._state)
        await self.check()
        for warning in settings_warnings(self.props, self._slot_ids):
            log.warning("%s", warning)

    async def check(self) -> str | None:
        """Ask `/props` which process the server is; when another than the last seen, start
        a new generation and return what told it. Never raises (a failure learns nothing)."""
        self._checked = trio.current_time()
        try:
            status, props = await ask(self._props_client(), "GET", "/props")
        except InferError:
            return None
        now = identity_of(props) if status == 200 else None
        if now is None:
            return None
        self.props = props
        before, self._identity = self._identity, now
        if before is None:
            _write_state(self._state, now)
            return None
        if (told := now.changed_from(before)) is None:
            return None
        self._generation += 1
        self._restarts[self._generation] = told
        log.info("llama-server restarted (%s)", told)
        _write_state(self._state, now)
        return told

    def _props_client(self) -> Client:
        client = self._client
        if isinstance(client, Client):
            return client
        return client.client_of(next(iter(client.config.slots)))

    def slot_user(self, slot: str) -> str | None:
        """The session whose request went out last on `slot`, in this loopd."""
        return self._users.get(slot)

    def restarted_since(self, session: str, generation: int | None = None) -> str | None:
        """What told a restart after `generation` (default: the session's latest request)."""
        since = self._seen.get(session, 0) if generation is None else generation
        later = [self._restarts[g] for g in range(since + 1, self._generation + 1)]
        return later[-1] if later else None

    async def before_request(
        self, session: str, slot: str, messages: Sequence[ChatMessage]
    ) -> str | None:
        if self._started and (
            self._identity is None  # the server was loading at start
            or trio.current_time() - self._checked >= FRESH_SECONDS
        ):
            await self.check()
        previous = self._users.get(slot)
        self._taken[session] = f"session {previous}" if previous not in (None, session) else None
        self._users[slot] = session
        restart = self.restarted_since(session)
        self._prior[session] = self._seen.get(session, 0)
        self._seen[session] = self._generation
        return restart

    async def after_loss(self, session: str, slot: str) -> tuple[str | None, str | None]:
        await self.check()
        restart = self.restarted_since(session, self._prior.get(session, 0))
        self._seen[session] = self._generation
        if restart is None and not self._warned:
            self._warned = True
            log.warning(
                "llama-server lost session %s's prefix without a restart (another session "
                "used its slot, or its host cache, --cache-ram, let it go); with the server's "
                "--slot-save-path and [cache] save_dir loopd restores it (README: Many "
                "sessions)",
                session,
            )
        return restart, self._taken.get(session)


def _read_state(path: Path | None) -> ServerIdentity | None:
    if path is None:
        return None
    try:
        with path.open("rb") as file:
            raw = json.loads(file.read(_MAX_STATE + 1)[:_MAX_STATE])
    except (OSError, ValueError):
        return None
    return identity_of(raw)


def _write_state(path: Path | None, identity: ServerIdentity) -> None:
    if path is None:
        return
    raw = {
        "media_marker": identity.media_marker,
        "build_info": identity.build_info,
        "model_path": identity.model_path,
    }
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(raw))
        os.replace(temporary, path)
    except OSError as error:
        log.warning("could not keep the server's identity in %s: %s", path, error)
