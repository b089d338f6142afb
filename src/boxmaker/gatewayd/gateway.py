"""The gateway's ear: what the network says, in order, each thing dealt with before the
position after it is kept (`speakers.decide` says what each asks for). A message to run goes
to loopd through the desk, and the next is read only once loopd has it, so a crash loses none
and a message read again is known to loopd by its origin.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import trio
from attrs import evolve

from ..client import ChannelError, ask
from ..config import FilesConfig, GatewayConfig, MatrixConfig
from ..proto import MOST_FILES, SessionId, StopFrame, StoppedFrame, WireError
from .answers import key_of
from .attaching import NotTaken
from .desk import Desk
from .matrix import Refused, Unreachable
from .port import Heard, Network, Reacted, Said, Sent, Unreadable
from .retry import patiently, wait_of
from .sent_files import SentFile, taken_by
from .speakers import (
    AnswerQuestion,
    Attach,
    Command,
    Decline,
    Ignore,
    Join,
    Leave,
    Refuse,
    Run,
    TellStranger,
    decide,
)
from .state import MAX_PENDING, MAX_ROOMS, Pending, Room, State, session_for
from .status import Status
from .watching import watch
from .words import HELP, dropped, too_many_waiting, visible, waits

__all__ = ["Gateway", "GatewayStopped"]

log = logging.getLogger("gatewayd")

STRANGER = "This agent answers only its owner."
UNKNOWN_ROOM = (
    "This room is not one of the gateway's any more (its state was reset?): invite the bot "
    "into a new room to talk to the agent."
)


class GatewayStopped(Exception):
    """The homeserver will not let the gateway go on (its token was revoked, say)."""


class Gateway:
    def __init__(
        self, network: Network, state: State, socket: Path, config: GatewayConfig,
        matrix: MatrixConfig, status: Status, files: FilesConfig | None = None,
    ) -> None:  # fmt: skip
        self.network = network
        self.state = state
        self.socket = socket
        self.config = config
        self.owners = frozenset(matrix.owners)
        self.me = matrix.user_id
        self.shared_rooms = matrix.allow_shared_rooms
        self.status = status
        self.files = files or FilesConfig()
        self.desk: Desk | None = None
        self._left: set[str] = set()  # rooms left while reading this batch

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            desk = self.desk = Desk(
                self.network, self.state, self.socket, self.config.edit_interval_s, nursery,
                self.files.max_bytes,
            )  # fmt: skip
            desk.on_change = self.status.touch
            nursery.start_soon(self.status.keep, self.shown)
            await nursery.start(watch, desk)
            await self._hear(desk)

    def shown(self) -> dict[str, Any]:
        """The gateway's part of the status file: loopd, the rooms and their sessions."""
        return {
            "loopd": self.desk is not None and self.desk.loopd_up,
            "rooms": [
                {"room": name, "session": room.session, "sessions": len(room.sessions)}
                for name, room in sorted(self.state.rooms.items())
            ],
            "pending": len(self.state.pending),
        }

    async def _hear(self, desk: Desk) -> None:
        attempt = 0
        while True:
            try:
                batch = await self.network.hear(self.state.position)
            except Unreachable as error:
                self.status.connected(False, str(error))
                wait = wait_of(attempt, error)
                log.warning("the homeserver: %s; trying again in %.1f s", error, wait)
                attempt += 1
                await trio.sleep(wait)
                continue
            except Refused as error:
                raise GatewayStopped(f"the homeserver refused to sync: {error}") from error
            attempt = 0
            self.status.connected(True)
            for room in () if batch.first else batch.gaps:
                log.warning(
                    "%s: more came since the last sync than it brings; the oldest is lost", room
                )
            self._left.clear()
            for heard in batch.heard:
                if batch.first and isinstance(heard, (Said, Sent, Reacted, Unreadable)):
                    continue  # from before the gateway's time: never run
                if heard.room not in self._left:  # what came after the gateway left, unread
                    await self._act(desk, heard)
            self.state.saved.position = batch.position
            self.state.save()

    async def _act(self, desk: Desk, heard: Heard) -> None:
        act = decide(
            heard, self.owners, self.me, questions=frozenset(self.state.questions),
            shared_rooms=self.shared_rooms, max_bytes=self.config.max_message_bytes,
            max_file_bytes=self.files.max_bytes,
        )  # fmt: skip
        if isinstance(act, Ignore):
            return
        if isinstance(act, TellStranger):
            room = self.state.rooms.get(act.room)
            if room is not None and not room.told_stranger:
                desk.notice(act.room, STRANGER, key_of("stranger", act.room))
                self.state.rooms[act.room] = evolve(room, told_stranger=True)
                self.state.save()
            return
        if isinstance(act, Join):
            await self._join(desk, act.room)
        elif isinstance(act, Decline):
            log.info("declined an invitation to %s from %s", act.room, act.inviter)
            await self._leave(desk, act.room)
        elif isinstance(act, Leave):
            if act.room in self.state.rooms:
                await desk.say(act.room, act.why, key_of("leaving", act.room), tries=5)
            await self._leave(desk, act.room)
        elif isinstance(act, Refuse):
            desk.notice(act.room, act.why, key_of("refused", act.event_id), act.event_id)
        elif self.state.handled(act.event_id):
            return  # dealt with before a crash: seen again
        elif act.room not in self.state.rooms:  # the bot's state was reset, say
            desk.notice(act.room, UNKNOWN_ROOM, key_of("unknown room", act.event_id), act.event_id)
        elif isinstance(act, Run):
            await self._run(desk, act)
        elif isinstance(act, Attach):
            if act.event_id in self.state.pending:  # taken before a crash: sent again
                await desk.send(act.event_id)
            else:
                await self._attach(desk, act)
        elif isinstance(act, Command):
            await self._command(desk, act)
            self._handled(act.event_id)
        elif isinstance(act, AnswerQuestion):
            if act.answer is None:
                said = "Answer with `y` (once), `s` (this conversation), `a` (always) or `n`."
            else:
                said = await desk.give_answer(act.room, act.question, act.answer)
            desk.notice(act.room, said, key_of("answer-said", act.event_id), act.event_id)
            self._handled(act.event_id)

    def _handled(self, event_id: str) -> None:
        self.state.mark_handled(event_id)
        self.state.save()

    async def _join(self, desk: Desk, room: str) -> None:
        if room in self.state.rooms:
            return
        if len(self.state.rooms) >= MAX_ROOMS:
            log.warning("an invitation to %s declined: %d rooms already", room, MAX_ROOMS)
            await self._leave(desk, room)
            return
        try:
            await patiently(lambda: self.network.join(room), "joining a room", tries=5)
        except (Refused, Unreachable) as error:
            log.warning("could not join %s: %s", room, error)
            return
        self.state.rooms[room] = Room((session_for(room),))
        self.state.save()
        desk.change_sessions()
        log.info("joined %s (session %s)", room, session_for(room))

    async def _leave(self, desk: Desk, room: str) -> None:
        try:
            await patiently(lambda: self.network.leave(room), "leaving a room", tries=5)
        except (Refused, Unreachable) as error:
            log.info("leaving %s: %s", room, error)
        self._left.add(room)
        if self.state.rooms.pop(room, None) is not None:
            for event, pending in list(self.state.pending.items()):
                if pending.room == room:
                    del self.state.pending[event]
            self.state.save()
            desk.change_sessions()
            log.info("left %s", room)

    async def _run(self, desk: Desk, act: Run, file: SentFile | None = None) -> None:
        """Send the owner's message `act` (with `file`, its own, and the room's files that
        wait), once it is in `pending`."""
        room = self.state.rooms[act.room]
        if act.event_id not in self.state.pending:
            if len(self.state.pending) >= MAX_PENDING:
                why = f"{MAX_PENDING} messages wait for their answers already; send it later."
                desk.notice(act.room, why, key_of("refused", act.event_id), act.event_id)
                return
            fresh, stale = taken_by(room.waiting, act.at)
            files = (*fresh, file) if file is not None else fresh
            self.state.pending[act.event_id] = Pending(
                act.room, room.session, act.text, files=files
            )
            self.state.rooms[act.room] = evolve(room, waiting=())
            self.state.save()
            for old in stale:
                desk.notice(
                    act.room, dropped(old.offer.name), key_of("dropped", old.event_id), old.event_id
                )
        await desk.send(act.event_id)

    async def _attach(self, desk: Desk, act: Attach) -> None:
        """Bring the owner's file to loopd: with a caption, it is a message; without, it
        waits in its room for the next (`sent_files`)."""
        sent = act.file
        fresh, _stale = taken_by(self.state.rooms[act.room].waiting, sent.at)
        most = min(self.files.max_files, MOST_FILES)
        if len(fresh) + 1 > most:
            brought: SentFile | NotTaken = NotTaken(too_many_waiting(sent.name, most))
        else:
            got = await desk.attacher.bring(act.room, sent.source, sent.name, sent.media_type)
            brought = got if isinstance(got, NotTaken) else SentFile(
                act.event_id, sent.source, got, sent.at
            )  # fmt: skip
        if isinstance(brought, NotTaken):
            desk.notice(act.room, brought.why, key_of("refused", act.event_id), act.event_id)
            self._handled(act.event_id)
        elif sent.caption is not None:
            await self._run(desk, Run(act.room, act.event_id, sent.caption, sent.at), brought)
        else:
            room = self.state.rooms[act.room]
            self.state.rooms[act.room] = evolve(room, waiting=(*room.waiting, brought))
            self._handled(act.event_id)
            desk.notice(act.room, waits(brought.offer), key_of("waits", act.event_id), act.event_id)

    async def _command(self, desk: Desk, act: Command) -> None:
        room = self.state.rooms[act.room]
        key = key_of("command", act.event_id)
        if act.name == "!help":
            said = HELP
        elif act.name == "!sessions":
            said = (
                "This room's conversations, the newest last (the current one marked):\n"
                + "\n".join(
                    f"- `{s}`" + (" (current)" if s == room.session else "") for s in room.sessions
                )
            )
        elif act.name == "!new":
            new = session_for(act.room, len(room.sessions) + 1)
            self.state.rooms[act.room] = evolve(room, sessions=(*room.sessions, new), created=False)
            self.state.save()
            desk.change_sessions()
            said = f"A new conversation: `{new}`. The old one is kept (`bxctl sessions` lists it)."
        else:
            said = await self._stop(room.session)
        desk.notice(act.room, said, key, act.event_id)

    async def _stop(self, session: str) -> str:
        try:
            answer = await ask(self.socket, StopFrame(SessionId(session)))
        except ChannelError as error:
            return f"Could not reach the agent: {visible(str(error))}"
        if isinstance(answer, StoppedFrame):
            return (
                "Stopping the turn that was running." if answer.stopped else "Nothing was running."
            )
        said = answer.message if isinstance(answer, WireError) else type(answer).__name__
        return f"The agent did not stop: {visible(said)}"
