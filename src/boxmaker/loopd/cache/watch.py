"""What loopd sees of llama-server between completions: which process it is, and which session
used each slot last. The facts behind a `cache_loss`'s cause (`outcome.explain_loss`), and the
warnings when a server's settings cannot keep the sessions' prefixes: once at start from
`/props`, and once at the first loss that no restart explains (`/props` does not show
`--cache-ram`).

Each llama-server the slots (and tiers) are on is watched on its own (`[server]` and each
`[servers.<name>]`; an OpenAI-style server has no `/props` and is not asked). A server's start
identity comes from `GET /props` (`infer.ServerIdentity`). It is asked when loopd starts, after
each loss on the server, and before a request to it while it is not known yet (a server still
loading at loopd's start answers 503) or was last asked `FRESH_SECONDS` ago or more: so a
restart while loopd ran is known before the next turn's request, and said before its answer
(`cache_cold`), while requests in a row (a turn's completions, a busy loopd) never wait for it.
Each change found is a new *generation*, of the server that changed; a session remembers the
generation of its previous request, so every session whose prefix a restart took is told so,
not only the first to notice, and a restart of one server is told to no session on another. The
identities last seen are kept in `<home>/run/server.json`, so a restart of both loopd and the
server (`make run` again) is still told from an eviction. The file is a hint: a missing,
unreadable or foreign one is ignored (the worst it can do is name the wrong cause). It is a few
hundred bytes, read and written in the event loop (a thread would cost more than the write, and
would let a test's virtual clock run on while it waits).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import attrs
import trio

from ...config import DEFAULT_SERVER
from ...proto import ChatMessage, DecodeError, parse_json, spaced, unstructure
from ...store import FileSystem
from ..infer import Client, InferError, ServerIdentity, Servers, ask, identity_of, settings_warnings

__all__ = ["FRESH_SECONDS", "LossWatch", "ServerWatch"]

log = logging.getLogger("loopd")

_MAX_STATE = 64 * 1024  # bytes of server.json read, and written at most
FRESH_SECONDS = 1.0  # a request after this long without asking `/props` asks it first


class LossWatch(Protocol):
    """What the daemon saw of the servers and their slots: `ServerWatch`, or `SlotCache`
    (which also restores saves)."""

    async def before_request(
        self, sid: str, slot: str, messages: Sequence[ChatMessage]
    ) -> str | None:
        """Called holding the slot's gate, before a request of `session` goes out: what told
        a server restart since the session's previous request, when the server therefore no
        longer holds its prefix (None: no restart known, or the prefix was restored)."""
        ...

    async def after_loss(self, sid: str, slot: str) -> tuple[str | None, str | None]:
        """After a loss: what said the server restarted since the session's previous
        completion, and who took its slot since; each None when nothing did."""
        ...


@attrs.define
class _Server:
    """What the watch knows of one llama-server."""

    client: Client
    identity: ServerIdentity | None = None
    props: object = None  # its last `/props` answer, for the settings check
    checked: float = -math.inf  # trio time of the last `/props` asked


class ServerWatch:
    """The daemon's `LossWatch`: each llama-server's identity, and who used each slot.

    Args:
        client: the shared client, or the servers (each llama-server among them is watched).
        state: where the identities last seen are kept (None: nowhere).
    """

    def __init__(self, client: Client | Servers, state: Path | None) -> None:
        self._client = client
        clients = [client] if isinstance(client, Client) else list(client.clients.values())
        self._servers = {c.name: _Server(c) for c in clients if c.llama}
        self._state = state
        self._warned = False  # of losses with no restart: once per loopd
        self._started = False  # start() was called: loopd's watch, not a test's bare one
        self._generation = 0  # generation 0: the identities the state file names
        self._restarts: dict[int, tuple[str, str]] = {}  # generation -> server, what told it
        self._seen: dict[str, int] = {}  # session -> generation at its latest request
        self._prior: dict[str, int] = {}  # session -> generation at the request before that
        self._users: dict[str, str] = {}  # slot -> session of its latest request
        self._taken: dict[str, str | None] = {}  # session -> who used its slot before it

    def _server_name(self, slot: str) -> str:
        client = self._client
        return client.name if isinstance(client, Client) else client.config.server_of(slot)

    def server_of(self, slot: str) -> str | None:
        """The name of the llama-server `slot` is on; None when it is not on one."""
        name = self._server_name(slot)
        return name if name in self._servers else None

    def identity(self, slot: str) -> ServerIdentity | None:
        """The identity of the server process `slot` is on, as last seen."""
        name = self.server_of(slot)
        return None if name is None else self._servers[name].identity

    async def start(self) -> None:
        """Read the identities last seen (by this loopd or one before it), then ask every
        server's at once: one that does not answer holds up no other's check or warnings."""
        self._started = True
        client = self._client
        slots = client.gates if isinstance(client, Client) else client.config.slots
        kept = _read_state(self._state, self._server_name(next(iter(slots))))
        for name, server in self._servers.items():
            server.identity = kept.get(name)
        async with trio.open_nursery() as nursery:
            for name in self._servers:
                nursery.start_soon(self._start_one, name)

    async def _start_one(self, name: str) -> None:
        server = self._servers[name]
        await self._check(name)
        client = server.client
        ids = [client.slot_id(slot) for slot in client.gates]
        tier_ids = [slot_id for slot_id in client.tiers.values() if slot_id is not None]
        which = f"llama-server {name}: " if len(self._servers) > 1 else ""
        for warning in settings_warnings(server.props, ids, tier_ids):
            log.warning("%s%s", which, warning)

    async def check(self, slot: str) -> str | None:
        """Ask the `/props` of the server `slot` is on which process it is; when another
        than the last seen, start a new generation and return what told it. Never raises
        (a failure learns nothing)."""
        name = self.server_of(slot)
        return None if name is None else await self._check(name)

    async def _check(self, name: str) -> str | None:
        server = self._servers[name]
        server.checked = trio.current_time()
        try:
            status, props = await ask(server.client, "GET", "/props")
        except InferError:
            return None
        now = identity_of(props) if status == 200 else None
        if now is None:
            return None
        server.props = props
        before, server.identity = server.identity, now
        if before is None:
            self._keep()
            return None
        if (told := now.changed_from(before)) is None:
            return None
        self._generation += 1
        self._restarts[self._generation] = (name, told)
        which = "llama-server" if name == DEFAULT_SERVER else f"llama-server {name}"
        log.info("%s restarted (%s)", which, told)
        self._keep()
        return told

    def _keep(self) -> None:
        known = {n: s.identity for n, s in self._servers.items() if s.identity is not None}
        _write_state(self._state, known)

    def slot_user(self, slot: str) -> str | None:
        """The session whose request went out last on `slot`, in this loopd."""
        return self._users.get(slot)

    def _restarted_since(self, slot: str, generation: int) -> str | None:
        """What told the latest restart, after `generation`, of the server `slot` is on."""
        name, told = self.server_of(slot), None
        for g in range(generation + 1, self._generation + 1):
            server, said = self._restarts[g]
            if server == name:
                told = said
        return told

    async def before_request(
        self, sid: str, slot: str, messages: Sequence[ChatMessage]
    ) -> str | None:
        name = self.server_of(slot)
        if self._started and name is not None:
            server = self._servers[name]
            # Not known yet (the server was loading at start), or not asked for a while.
            if server.identity is None or trio.current_time() - server.checked >= FRESH_SECONDS:
                await self._check(name)
        previous = self._users.get(slot)
        self._taken[sid] = f"session {previous}" if previous not in (None, sid) else None
        self._users[slot] = sid
        restart = self._restarted_since(slot, self._seen.get(sid, 0))
        self._prior[sid] = self._seen.get(sid, 0)
        self._seen[sid] = self._generation
        return restart

    async def after_loss(self, sid: str, slot: str) -> tuple[str | None, str | None]:
        await self.check(slot)
        restart = self._restarted_since(slot, self._prior.get(sid, 0))
        self._seen[sid] = self._generation
        if restart is None and not self._warned:
            self._warned = True
            log.warning(
                "llama-server lost session %s's prefix without a restart (another session "
                "used its slot, or its host cache, --cache-ram, let it go); with the server's "
                "--slot-save-path and [cache] save_dir loopd restores it (README: Many "
                "sessions)",
                sid,
            )
        return restart, self._taken.get(sid)


@attrs.frozen
class _State:
    """What `server.json` holds: each llama-server's identity as last seen, by name."""

    servers: dict[str, ServerIdentity]


def _read_state(path: Path | None, first: str) -> dict[str, ServerIdentity]:
    """The identities kept, by server name: `_State`, or one identity (what loopd kept before
    it watched each server: that of the server of the first slot, `first`). Each is read as
    `/props` is (`identity_of`): one that is not an identity is left out, not the others."""
    if path is None:
        return {}
    try:
        with path.open("rb") as file:
            raw = parse_json(file.read(_MAX_STATE + 1)[:_MAX_STATE])
    except (OSError, DecodeError):
        return {}
    if not isinstance(raw, dict):
        return {}
    servers = raw.get("servers", {first: raw})
    if not isinstance(servers, dict):
        return {}
    return {
        name: identity
        for name, value in servers.items()
        if (identity := identity_of(value)) is not None
    }


def _write_state(path: Path | None, identities: dict[str, ServerIdentity]) -> None:
    """Keep the identities in `path`, replaced whole (a hint, so without fsync: written in
    the event loop, which an fsync would hold)."""
    if path is None:
        return
    data = spaced(unstructure(_State(identities))).encode()  # ASCII: a character is a byte
    if len(data) > _MAX_STATE:
        log.warning(
            "the servers' identities are %d bytes, past the %d kept in %s; not kept",
            len(data),
            _MAX_STATE,
            path,
        )
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        FileSystem().replace_file(path, data, sync=False)
    except OSError as error:
        log.warning("could not keep the servers' identities in %s: %s", path, error)
