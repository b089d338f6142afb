"""The gateway's side of loopd: each owner's message sent as a detached turn with its origin
(and acknowledged), with its files attached first (`attaching`), the answers shown in their
rooms, the questions put to the owner and their answers given back. docs/protocol.md, "Turns
that outlive their channel".

A message is in `state.pending` before it goes to loopd and leaves it once its answer is
posted. Sent again (after a crash, or when the watch opens again), loopd answers `duplicate`
with what became of it: `running` or `waiting` (the watch will show it), `done` with its
answer (posted under the same keys as before, so once), or another end (told).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from functools import partial
from pathlib import Path

import trio
from attrs import evolve

from ..client import ChannelError, ask
from ..proto import (
    Answer,
    ApprovalDoneFrame,
    ApprovalFrame,
    ApprovalNeeded,
    Break,
    DuplicateFrame,
    ErrorCode,
    ListApprovalsFrame,
    Origin,
    SessionId,
    TurnFrame,
    WaitingFrame,
    WireError,
)
from .answers import key_of
from .attaching import Attacher, NotTaken
from .matrix import Refused, Unreachable
from .port import Network
from .retry import patiently
from .showing import Showing
from .state import MAX_QUESTIONS, Asked, Pending, Room, State
from .words import ended, ended_as, question, visible

__all__ = ["Desk"]

log = logging.getLogger("gatewayd")

ACK_S = 60.0  # a turn frame unanswered this long is sent again (loopd knows it by its origin)
BUSY_S = 5.0  # the wait before a message the mailbox had no room for is sent again
NOT_RUNNING = (
    "The agent is not running right now; your messages wait and will be answered when it is back."
)


class Desk:
    def __init__(
        self, network: Network, state: State, socket: Path, interval: float,
        nursery: trio.Nursery, max_file_bytes: int,
    ) -> None:  # fmt: skip
        self.network = network
        self.state = state
        self.socket = socket
        self.interval = interval
        self.nursery = nursery  # where the showings post
        self.showings: dict[str, Showing] = {}
        self.sessions_changed = trio.Event()
        self.watched: tuple[str, ...] = ()
        self._watch_in_place = trio.Event()
        self._watch_moved = trio.Event()  # set (and replaced) whenever `watched` changes
        self.loopd_up = False
        self._told_down: set[str] = set()  # rooms told that the agent is not running
        self.on_change: Callable[[], None] = lambda: None  # the status file's to show
        self.attacher = Attacher(network, socket, max_file_bytes, self._loopd_down)

    # --- the watch's side ------------------------------------------------------------------

    def change_sessions(self) -> None:
        self.sessions_changed.set()
        self.sessions_changed = trio.Event()
        self.on_change()

    def watching(self, sessions: tuple[str, ...], nursery: trio.Nursery) -> None:
        self._moved(sessions)
        self.loopd_up = True
        self._told_down.clear()
        self._watch_in_place.set()
        nursery.start_soon(self.reconcile)

    def watch_lost(self, why: str) -> None:
        if self.loopd_up:
            log.warning("the watch on loopd ended: %s", why)
        self.loopd_up = False
        self.attacher.lost()
        self._watch_in_place = trio.Event()
        self._moved(())

    def _moved(self, sessions: tuple[str, ...]) -> None:
        self.on_change()
        self.watched = sessions
        self._watch_moved.set()
        self._watch_moved = trio.Event()

    async def watch_covers(self, session: str) -> None:
        while session not in self.watched:
            await self._watch_moved.wait()

    def showing_for(self, room: str, origin: Origin | None, *, late: bool) -> Showing:
        """The Showing of a turn started by `origin` (one per origin: the watch and a
        `duplicate` share it)."""
        if origin is not None and origin.channel == "matrix":
            pending = self.state.pending.get(origin.id)
            if pending is not None and pending.joined is not None:  # another turn's answer
                key, reply_to = pending.joined, pending.joined_reply
            else:
                key, reply_to = key_of("answer", origin.id), origin.id
        elif origin is not None:
            key, reply_to = key_of("answer", origin.channel, origin.id), None
        else:
            key, reply_to = secrets.token_hex(16), None
        if (showing := self.showings.get(key)) is None or showing.finished.is_set():
            showing = self.showings[key] = Showing(
                self.network, room, key, reply_to, self.interval, late=late
            )
            self.nursery.start_soon(showing.run, lambda: self._shown(key, reply_to))
        return showing

    async def _shown(self, key: str, reply_to: str | None) -> None:
        """The answer is posted: the messages it answers leave `pending`."""
        gone = [
            event for event, pending in self.state.pending.items()
            if (event == reply_to and pending.joined is None) or pending.joined == key
        ]  # fmt: skip
        for event in gone:
            del self.state.pending[event]
            self.state.mark_handled(event)
        if gone:
            self.state.save()
        self.showings.pop(key, None)

    def joined(self, event_id: str, key: str) -> None:
        """The owner's message `event_id` was taken into the turn shown under `key`: its
        answer is that turn's."""
        pending = self.state.pending.get(event_id)
        showing = self.showings.get(key)
        if pending is None or showing is None:
            return
        self.state.pending[event_id] = evolve(pending, joined=key, joined_reply=showing.reply_to)
        self.state.save()

    # --- questions --------------------------------------------------------------------------

    def ask_owner(self, room: str, needed: ApprovalNeeded) -> None:
        self.nursery.start_soon(self._ask, room, needed)

    async def _ask(self, room: str, needed: ApprovalNeeded) -> None:
        text = question(needed)
        try:
            event = await patiently(
                lambda: self.network.post(room, text, key=key_of("question", needed.id)),
                "a question",
            )
        except Refused as error:
            log.warning("could not ask in %s: %s", room, error)
            return
        questions = self.state.questions
        if event not in questions:
            if len(questions) >= MAX_QUESTIONS:
                questions.pop(next(iter(questions)))
            questions[event] = Asked(needed.id, room)
            self.state.save()

    def answered(self, approval: str) -> None:
        questions = self.state.questions
        for event in [e for e, asked in questions.items() if asked.approval == approval]:
            del questions[event]
            self.state.save()

    async def give_answer(self, room: str, question_event: str, answer: Answer) -> str:
        """Give loopd the owner's answer to the question posted in `room` as `question_event`:
        what to tell the owner."""
        asked = self.state.questions.get(question_event)
        if asked is None or asked.room != room:
            return "That question was answered already, or waited too long and was denied."
        id = asked.approval
        try:
            frame = await ask(self.socket, ApprovalFrame(id, answer))
        except ChannelError as error:
            return f"The answer could not reach the agent: {visible(str(error))}"
        if isinstance(frame, ApprovalDoneFrame):
            self.answered(id)
            return f"Answered: {answer.value}."
        if isinstance(frame, WireError) and frame.code is ErrorCode.NO_SUCH_APPROVAL:
            self.answered(id)
            return "That question was answered already, or waited too long and was denied."
        said = frame.message if isinstance(frame, WireError) else type(frame).__name__
        return f"The answer was not taken: {visible(said)}"

    # --- sending the owner's messages -------------------------------------------------------

    async def send(self, event_id: str) -> None:
        """Send the pending message `event_id` to loopd until loopd has it (or has refused
        it for good); then the watch shows its turn."""
        while (pending := self.state.pending.get(event_id)) is not None:
            room = self.state.rooms.get(pending.room)
            if room is None:  # the room was left meanwhile
                del self.state.pending[event_id]
                self.state.save()
                return
            if self.loopd_up:  # a new session: its watch is being opened
                with trio.move_on_after(ACK_S):
                    await self.watch_covers(pending.session)
            generation = self.attacher.generation
            if (refused := await self.attacher.ready(pending.room, pending.files)) is not None:
                self._not_taken(event_id, pending, refused)
                return
            files = tuple(file.offer for file in pending.files)
            frame = TurnFrame(
                SessionId(pending.session), pending.text, resume=room.created, detach=True,
                break_=None if files else Break.SOFT, origin=Origin("matrix", event_id),
                files=files,
            )  # fmt: skip
            try:
                with trio.fail_after(ACK_S):
                    answer = await ask(self.socket, frame)  # the first frame: loopd has it
            except (ChannelError, trio.TooSlowError) as error:
                await self._loopd_down(pending.room, str(error))
                continue
            if not await self._took(event_id, pending, room, answer, generation):
                continue
            log.info("%s: loopd has it (%s)", event_id, type(answer).__name__)
            return

    async def _loopd_down(self, room: str, why: str) -> None:
        if room not in self._told_down:  # once while loopd is away: the log says it once too
            log.warning("loopd did not take a message: %s; it waits", why)
            self._told_down.add(room)
            self.notice(room, NOT_RUNNING, secrets.token_hex(16))
        with trio.move_on_after(2.0):
            await self._watch_in_place.wait()
        await trio.sleep(0.5)

    def _not_taken(self, event_id: str, pending: Pending, refused: NotTaken) -> None:
        showing = self.showing_for(pending.room, Origin("matrix", event_id), late=True)
        showing.end(None, refused.why)

    async def _took(
        self, event_id: str, pending: Pending, room: Room, answer: object, generation: int
    ) -> bool:
        """What loopd's first answer to the message means; False: send it again."""
        if isinstance(answer, DuplicateFrame):
            self.duplicate(event_id, pending, answer)
            return True
        if isinstance(answer, WireError):
            code = answer.code
            if code is ErrorCode.FILE_REFUSED:  # before anything of it was kept
                if generation != self.attacher.generation:
                    return False  # loopd went away since its files were attached: again
                showing = self.showing_for(pending.room, Origin("matrix", event_id), late=True)
                showing.end(None, ended(answer))
                return True
            if code in (ErrorCode.SESSION_EXISTS, ErrorCode.NO_SUCH_SESSION):
                self._created(pending.room, code is ErrorCode.SESSION_EXISTS)
                return False
            if code is ErrorCode.SESSION_BUSY:
                await trio.sleep(BUSY_S)
                return False
            if code in (ErrorCode.BAD_FRAME, ErrorCode.SESSION_FULL, ErrorCode.INTERNAL):
                # refused before anything of it was kept (the watch may tell it too: one key)
                showing = self.showing_for(pending.room, Origin("matrix", event_id), late=True)
                showing.end(None, f"Not taken: {visible(answer.message, 600)}")
                return True
        if not room.created:
            self._created(pending.room, True)
        return True

    def _created(self, room_id: str, created: bool) -> None:
        self.state.rooms[room_id] = evolve(self.state.rooms[room_id], created=created)
        self.state.save()

    def duplicate(self, event_id: str, pending: Pending, answer: DuplicateFrame) -> None:
        if answer.outcome in ("running", "waiting"):
            return  # the watch shows it
        showing = self.showing_for(pending.room, Origin("matrix", event_id), late=True)
        if answer.outcome == "done":
            showing.end(answer.content or "")
        else:
            showing.end(None, ended_as(answer.outcome))

    async def reconcile(self) -> None:
        """The watch is in place: ask loopd again about each message it has not answered, and
        post again each question that waits for the owner."""
        for event_id in list(self.state.pending):
            pending = self.state.pending.get(event_id)
            if pending is not None and pending.session in self.watched:
                await self.send(event_id)
        try:
            waiting = await ask(self.socket, ListApprovalsFrame())
        except ChannelError:
            return
        if isinstance(waiting, WaitingFrame):
            for entry in waiting.waiting:
                room = self.state.room_of(str(entry.session))
                if room is not None:
                    needed = ApprovalNeeded(
                        entry.id, entry.tool, entry.summary, entry.detail, entry.only_once
                    )
                    log.info("a question waiting for the owner, posted again in %s", room)
                    self.ask_owner(room, needed)

    async def say(
        self, room: str, text: str, key: str, reply_to: str | None = None,
        tries: int | None = None,
    ) -> None:  # fmt: skip
        """Post a notice (once per `key`), trying `tries` times (None: until the homeserver
        takes it); one it refuses, or that never went, is logged."""
        post = partial(self.network.post, room, text, key=key, reply_to=reply_to, notice=True)
        try:
            await patiently(post, "a notice", tries=tries)
        except (Refused, Unreachable) as error:
            log.warning("could not post in %s: %s", room, error)

    def notice(self, room: str, text: str, key: str, reply_to: str | None = None) -> None:
        """`say` in a task of its own: nothing waits for it."""
        self.nursery.start_soon(self.say, room, text, key, reply_to)
