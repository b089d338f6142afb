"""Sessions that survive a llama-server restart: each session's slot state saved
after its turn, restored before a turn whose prefix the server no longer holds.

With `[cache] save_dir` set (llama-server started with `--slot-save-path` there), after a turn
ends loopd asks the server to save the slot (`POST /slots/<id>?action=save`) into
`<digest>.bin`, and writes beside it `<digest>.json`: the token count the server saved, the
sha256 of the messages that state is for and how many they are, and the server process that
saved it. The save runs in the background and only when the slot is idle and still the
session's (no request holds or waits for its gate, no other session used it since), so it
never delays the turn that asked for it; a request that comes during a save waits for it, as
the server would make it wait. A newer save of a session replaces the older; past `max_bytes`
the least recently used go. The notes beside the saves are a few hundred bytes, written in the
event loop (a thread would cost more than the write).

Before a request, holding the slot's gate: when the session has a save and the server lost
its prefix (another process since the save, or another session used the slot since), and the
saved messages are the start of this request (count and hash) — restore
(`action=restore`), and check the token count the server restored. Every failure is a warning
and a normal, slower request: the cache is an optimisation, never a reason to fail a turn.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from attrs import field, frozen, validators

from ... import layout
from ...proto import ChatMessage, encode, loads, spaced, unstructure
from ...store import FileSystem
from ..infer import Client, InferError, ProtocolError, Servers, ask
from .watch import ServerWatch

__all__ = ["Saved", "SlotCache", "prefix_hash"]

log = logging.getLogger("loopd")

_MAX_META = 4096  # bytes read of a .json beside a save
_PENDING = 64  # saves waiting at most; more are dropped (the next turn saves again)


def prefix_hash(messages: Sequence[ChatMessage]) -> str:
    """The sha256 of the messages as JSON values, one line each (the request's bytes)."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(encode(unstructure(message)) + b"\n")
    return digest.hexdigest()


@frozen
class Saved:
    """What is kept beside a save (its JSON object, through the converter): the state is for
    the first `messages` messages of a request (`prefix` their hash), `tokens` long, saved by
    the server process `marker`."""

    tokens: int = field(validator=validators.ge(0))
    messages: int = field(validator=validators.ge(0))
    prefix: str
    marker: str

    @classmethod
    def read(cls, path: Path) -> Saved | None:
        """The note at `path`; None when it cannot be read or is not a note."""
        try:
            with path.open("rb") as file:
                return loads(cls, file.read(_MAX_META + 1)[:_MAX_META])
        except (OSError, ValueError):  # ValueError: DecodeError, not a note
            return None

    def write(self, path: Path) -> None:
        """Replace the note at `path` with this one (without fsync: a hint, written in the
        event loop).

        Raises:
            OSError: from the file system.
        """
        FileSystem().replace_file(path, spaced(unstructure(self)).encode(), sync=False)


class SlotCache:
    """The daemon's `LossWatch` with saves: `ServerWatch`'s facts, and save and restore.

    Args:
        client: the shared client, or the servers (each slot's gate and small routes through
            `client_of(slot)`).
        watch: the server's identity and the slots' users.
        save_dir: llama-server's `--slot-save-path`.
        max_bytes: the saves' total size kept at most.
    """

    def __init__(
        self, client: Client | Servers, watch: ServerWatch, save_dir: Path, max_bytes: int
    ) -> None:
        self._client = client
        self.watch = watch
        self._dir = save_dir
        self._max_bytes = max_bytes
        self._pending: dict[str, tuple[str, tuple[ChatMessage, ...], int]] = {}
        self._send, self._receive = trio.open_memory_channel[str](_PENDING)
        self.saved = 0  # saves done, restores done: for tests and the log
        self._count: dict[str, int] = {}  # saves per session, in this loopd
        self.restored = 0

    def _name(self, sid: str) -> str:
        # A digest: a session id may hold "..", which the server refuses in a file name.
        return hashlib.sha256(sid.encode()).hexdigest()[:40]

    # --- the LossWatch ------------------------------------------------------------------------

    async def before_request(
        self, sid: str, slot: str, messages: Sequence[ChatMessage]
    ) -> str | None:
        taken = self.watch.slot_user(slot) not in (None, sid)
        saved = None
        if self.watch.server_of(slot) is not None:  # a llama-server: it can save and restore
            saved = Saved.read(layout.save_note(self._dir, self._name(sid)))
        if saved is not None:
            await self.watch.check(slot)  # first: the request is then of the generation it sees
        told = await self.watch.before_request(sid, slot, messages)
        if saved is None:
            return told
        identity = self.watch.identity(slot)
        restarted = identity is not None and identity.media_marker != saved.marker
        if not (restarted or taken):
            return told
        if saved.messages > len(messages) or prefix_hash(messages[: saved.messages]) != (
            saved.prefix
        ):
            return told  # the saved state is not for a prefix of this request
        return None if await self._restore(sid, slot, saved) else told

    async def after_loss(self, sid: str, slot: str) -> tuple[str | None, str | None]:
        return await self.watch.after_loss(sid, slot)

    # --- saving -------------------------------------------------------------------------------

    def after_turn(
        self, sid: str, slot: str, messages: tuple[ChatMessage, ...], prompt_tokens: int
    ) -> None:
        """Ask for a save of the session's slot (in the background, by `serve`); a newer ask
        replaces an older one still waiting. `prompt_tokens`: the last request's prompt. A
        slot on a server other than llama-server is not saved."""
        if self.watch.server_of(slot) is None:
            return
        fresh = sid not in self._pending
        self._pending[sid] = (slot, messages, prompt_tokens)
        if fresh:
            try:
                self._send.send_nowait(sid)
            except trio.WouldBlock:
                del self._pending[sid]

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Save what `after_turn` asked for, one at a time, forever."""
        task_status.started()
        async for sid in self._receive:
            slot, messages, prompt_tokens = self._pending.pop(sid)
            await self._save(sid, slot, messages, prompt_tokens)

    async def _save(
        self, sid: str, slot: str, messages: tuple[ChatMessage, ...], prompt_tokens: int
    ) -> None:
        gate = self._client_of(slot).gates[slot]
        try:
            gate.acquire_nowait()  # the slot is idle in loopd, or this save is not made
        except trio.WouldBlock:
            return
        try:
            if self.watch.slot_user(slot) != sid:
                return  # another session used the slot since: it holds theirs now
            name = self._name(sid)
            answer = await self._action(slot, "save", layout.slot_save(self._dir, name).name)
            if answer is None:
                return
            tokens = answer.get("n_saved")
            if type(tokens) is not int or tokens < prompt_tokens:
                log.warning(
                    "slot %s held %r tokens, not session %s's %d; not kept",
                    slot,
                    tokens,
                    sid,
                    prompt_tokens,
                )
                _remove(layout.slot_save(self._dir, name))
                return
            identity = self.watch.identity(slot)
            saved = Saved(
                tokens,
                len(messages),
                prefix_hash(messages),
                identity.media_marker if identity else "",
            )
            self._keep(name, saved)
            self.saved += 1
            self._count[sid] = count = self._count.get(sid, 0) + 1
            log.info(
                "slot %s: saved session %s (save %d: %d tokens, %s bytes)",
                slot,
                sid,
                count,
                tokens,
                answer.get("n_written"),
            )
        finally:
            gate.release()

    def _keep(self, name: str, saved: Saved) -> None:
        meta = layout.save_note(self._dir, name)
        try:
            saved.write(meta)
            self._trim()
        except OSError as error:
            log.warning("slot save %s not kept: %s", meta, error)

    def _trim(self) -> None:
        """Remove the least recently used saves until the rest fit in `max_bytes`."""
        saves = []
        for meta in self._dir.glob(layout.SAVE_NOTES):
            blob = layout.slot_save(self._dir, meta.stem)
            try:
                saves.append((meta.stat().st_mtime_ns, blob.stat().st_size, meta, blob))
            except OSError:
                continue
        total = sum(size for _, size, _, _ in saves)
        for _, size, meta, blob in sorted(saves, key=lambda entry: entry[0]):
            if total <= self._max_bytes:
                break
            _remove(meta)
            _remove(blob)
            total -= size

    # --- restoring ----------------------------------------------------------------------------

    async def _restore(self, sid: str, slot: str, saved: Saved) -> bool:
        """Whether the server now holds the saved state in the slot."""
        name = self._name(sid)
        answer = await self._action(slot, "restore", layout.slot_save(self._dir, name).name)
        if answer is None:
            return False
        if answer.get("n_restored") != saved.tokens:
            log.warning(
                "slot %s: restored %r tokens of session %s, its save had %d",
                slot,
                answer.get("n_restored"),
                sid,
                saved.tokens,
            )
            return False
        self.restored += 1
        log.info("slot %s: restored session %s (%d tokens)", slot, sid, saved.tokens)
        meta = layout.save_note(self._dir, name)
        with contextlib.suppress(OSError):
            os.utime(meta)  # used now: the last to go
        return True

    def _client_of(self, slot: str) -> Client:
        client = self._client
        return client if isinstance(client, Client) else client.client_of(slot)

    async def _action(self, slot: str, action: str, filename: str) -> dict[str, Any] | None:
        """One slot action; its answer, or None after a warning saying why not. An action
        whose connection closed before any answer is asked once more: a save or a restore
        may be made twice, and the connection was likely one the server had just closed
        (seen on the real server, right after a completion)."""
        client = self._client_of(slot)
        path = f"/slots/{client.slot_id(slot)}?action={action}"
        for attempt in (1, 2):
            try:
                status, answer = await ask(client, "POST", path, {"filename": filename})
                break
            except InferError as error:
                if attempt == 1 and isinstance(error, ProtocolError) and error.cut:
                    continue
                said = "slot %s %s failed: %s; the turn goes on without it"
                log.warning(said, slot, action, error)
                return None
        if status != 200 or not isinstance(answer, dict):
            log.warning(
                "slot %s %s answered %d: %.300s; the turn goes on without it",
                slot,
                action,
                status,
                spaced(answer),
            )
            return None
        return answer


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
