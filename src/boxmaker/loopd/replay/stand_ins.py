"""Everything a turn asks of the world, answered from its log (SPEC section 20): the server's
completions, brokerd's results, the owner's answers, the soft breaks waiting, the cache's
causes, the clock. Each answers by where the replayed session is (`Cursor.place`): the
record the loop is about to write there in the recording says what the answer was.

When the recording holds no answer (the turn was cut there, or the replay went another way),
the cursor's `stuck` decides: it ends the turn as the recording's did, or raises `Gap`.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NoReturn

import trio

from ...proto import (
    AssistantRecord,
    BreakRecord,
    CacheLossRecord,
    ChatMessage,
    ChatRequest,
    Completion,
    Content,
    EpochEndRecord,
    LogRecord,
    LossCause,
    Progress,
    Reasoning,
    RecallRecord,
    Refusal,
    Timestamp,
    Timings,
    UsageRecord,
    UserRecord,
    encode,
)
from ...store import OpenSession
from ..infer import Connect, Http, OnEvent
from ..loop import Message
from .errors import Gap, MissingInput, ReplayError
from .tape import Place, Run, Tape

__all__ = [
    "Cursor",
    "ReplayClient",
    "ReplayClock",
    "ReplaySteer",
    "ReplayTimer",
    "ReplayWatch",
]

Stuck = Callable[[str], Awaitable[NoReturn]]


class Cursor:
    """Where the replayed session is, in the recording's terms, and the run it is in."""

    def __init__(self, tape: Tape, folder: Path) -> None:
        self.tape = tape
        self.folder = folder  # the recorded session's folder (read only: whole results)
        self.session: OpenSession | None = None
        self.run: Run | None = None
        self.stuck: Stuck = self._gap
        self.reading: Callable[[Place], None] = _nothing  # told of each reading's place
        self.requests: list[tuple[Place, tuple[ChatMessage, ...]]] | None = None  # --step
        self.failure: ReplayError | None = None  # what stopped the run (see `failed`)

    @property
    def place(self) -> Place:
        assert self.session is not None
        return self.session.epoch, len(self.session.records)

    def record(self, ahead: int = 0) -> LogRecord | None:
        """The recording's record `ahead` places past where the session is."""
        epoch, index = self.place
        return self.tape.at((epoch, index + ahead))

    def settings_user(self) -> UserRecord:
        assert self.run is not None
        user = self.tape.at(self.run.user)
        assert isinstance(user, UserRecord)
        return user

    def failed(self, error: ReplayError) -> ReplayError:
        """Keep `error` as the run's failure (the first one), to raise it: the loop may
        take an exception from a tool for the tool's failure, never the replay's."""
        if self.failure is None:
            self.failure = error
        return error

    async def _gap(self, what: str) -> NoReturn:
        raise self.failed(Gap(self.place, what))


class ReplayClock:
    """The wall clock: each reading is the one the recording's record made from it had. The
    loop reads the clock only to make a record, each record's time once (an `approval` also
    when it was asked), so the readings since the session last grew step through the times of
    the records to come."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self._at: Place | None = None
        self._read = 0

    def reset(self) -> None:
        """The session was cut back: its next reading starts afresh."""
        self._at = None

    def now(self) -> Timestamp:
        place = self.cursor.place
        self.cursor.reading(place)
        if place != self._at:
            self._at, self._read = place, 0
        readings = self.cursor.tape.readings(place)
        value = next(itertools.islice(readings, self._read, None), None)
        self._read += 1
        if value is None:  # past the recording's end: what is written here is a difference
            last = self.cursor.tape.epochs[-1][-1]
            return last.time
        return value


class ReplayTimer:
    """The turn's duration (trio's clock, read when it starts and when it ends): the
    recording's `turn_end` `ms`."""

    def __init__(self) -> None:
        self.ms = 0
        self._started = False

    def begin(self, ms: int) -> None:
        self.ms, self._started = ms, False

    def __call__(self) -> float:
        if not self._started:
            self._started = True
            return 0.0
        return self.ms / 1000


class ReplayClient:
    """The server: each completion the one recorded where the request is asked, its text
    streamed as the loop received it where that decided anything (a stream loopd stopped
    comes in its recorded pieces); an epoch's summary and merges from its `epoch_end`."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self._merges: tuple[Place, list[str]] | None = None

    def client_of(self, slot: str) -> ReplayClient:
        return self

    @property
    def cache_block(self) -> int:
        usage = self.cursor.record(1)
        return usage.cache_block if isinstance(usage, UsageRecord) else 1

    async def context_size(self, slot: str) -> int | None:
        user = self.cursor.settings_user()
        if user.settings is None:
            raise self.cursor.failed(MissingInput(self.cursor.place, _NO_SETTINGS))
        return user.settings.n_ctx

    async def tokenize(self, text: str) -> int:
        """The message's tokens, as the server counted them after it refused the message."""
        await trio.lowlevel.checkpoint()
        refused = self._refused(asking=False)
        if refused is None:
            await self.cursor.stuck("a count of the message's tokens (after a refusal)")
        if refused.tokens is None:
            raise Connect("the recorded count of the message's tokens failed")
        return refused.tokens

    def _refused(self, *, asking: bool = True) -> Refusal | None:
        """The refusal the run's message met before the epoch it was sent again in (while the
        session is in an epoch before that one); `asking`, for the message's own request."""
        user, run, session = self.cursor.settings_user(), self.cursor.run, self.cursor.session
        assert run is not None
        assert session is not None
        if user.settings is None or session.epoch >= run.user[0]:
            return None
        # The message's own request (not the summary's of the epoch it opens for it).
        last = session.records[-1]
        if asking and not isinstance(last, UserRecord | RecallRecord):
            return None
        return user.settings.refused

    @asynccontextmanager
    async def slot(self, slot: str, on_event: OnEvent) -> AsyncIterator[ReplayClient]:
        await trio.lowlevel.checkpoint()
        yield self

    async def chat_with_retry(self, request: ChatRequest, on_event: OnEvent) -> Completion:
        if (refused := self._refused()) is not None:
            await trio.lowlevel.checkpoint()
            sizes = {"n_prompt_tokens": refused.prompt, "n_ctx": refused.n_ctx}
            error = {"code": 400, "type": "exceed_context_size_error", "message": _REFUSED}
            error.update({key: value for key, value in sizes.items() if value is not None})
            raise Http(400, encode({"error": error}).decode())
        record = self.cursor.record()
        if isinstance(record, EpochEndRecord):
            return await self._summary(record, request.messages)
        usage = self.cursor.record(1)
        if self.cursor.requests is not None:
            self.cursor.requests.append((self.cursor.place, request.messages))
        if not isinstance(record, AssistantRecord) or not isinstance(usage, UsageRecord):
            await self.cursor.stuck("a completion")
        if usage.stopped is not None:
            await self._stopped(record, usage, on_event)
        on_event(Progress(usage.cache_n + usage.prompt_n, usage.cache_n, usage.prompt_n))
        if record.reasoning_content:
            on_event(Reasoning(record.reasoning_content))
        if record.content:
            on_event(Content(record.content))
        await trio.lowlevel.checkpoint()  # where a stop the watch asked for lands
        return Completion(
            content=record.content,
            reasoning_content=record.reasoning_content,
            tool_calls=record.tool_calls,
            finish_reason="length" if usage.length else "stop",
            timings=Timings(usage.cache_n, usage.prompt_n, usage.predicted_n, 0.0, 0.0),
            reasoning_tokens=usage.reasoning_tokens,
            thinking_capped=usage.thinking_capped,
            cache_block=usage.cache_block,
        )

    async def _stopped(
        self, record: AssistantRecord, usage: UsageRecord, on_event: OnEvent
    ) -> NoReturn:
        """A stream loopd stopped: its pieces as they came, then the stop must land."""
        content = record.content or ""
        if not usage.pieces and content:
            raise self.cursor.failed(MissingInput(self.cursor.place, _NO_PIECES))
        if sum(usage.pieces) != len(content):
            raise self.cursor.failed(
                Gap(self.cursor.place, "the stopped stream's pieces do not add up to its text")
            )
        on_event(Progress(usage.cache_n + usage.prompt_n, usage.cache_n, usage.prompt_n))
        reasoning = [record.reasoning_content or ""]
        reasoning += [""] * (usage.reasoning_tokens - 1)
        for text in reasoning[: usage.reasoning_tokens]:
            on_event(Reasoning(text))
        at = 0
        for size in usage.pieces:
            on_event(Content(content[at : at + size]))
            at += size
        await trio.lowlevel.checkpoint()  # the stop lands here
        await self.cursor.stuck("the rest of a stream the recording's loop stopped here")

    async def _summary(self, end: EpochEndRecord, messages: Sequence[ChatMessage]) -> Completion:
        """The epoch's summary (the first request at its `epoch_end`), then its merges of
        summaries, in the order the new ones stand in its history."""
        place = self.cursor.place
        if self._merges is None or self._merges[0] != place:
            merged = list(end.merges)
            self._merges = (place, merged)
            text, tokens = end.summary or "", end.summary_tokens
            timings = Timings(end.cache_n, end.prompt_n, tokens, 0.0, 0.0)
        else:
            if not self._merges[1]:  # the recording's merge failed, or gave no text
                raise Connect("the recorded merge of summaries gave none")
            text = self._merges[1].pop(0)
            timings = Timings(0, 0, 0, 0.0, 0.0)
        await trio.lowlevel.checkpoint()
        return Completion(text, None, None, "stop", timings, 0, False)


class ReplaySteer:
    """The mailbox: the soft breaks the recording took at this step, and how a hard break
    ended the turn."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self.hard = False
        self.stopped = False

    def take(self) -> Sequence[Message]:
        taken: list[Message] = []
        ahead = 0
        while True:
            brk, user = self.cursor.record(ahead), self.cursor.record(ahead + 1)
            if not (isinstance(brk, BreakRecord) and not brk.hard):
                return taken
            if not isinstance(user, UserRecord):
                return taken
            taken.append((user.content, user.origin, user.untrusted))
            ahead += 2


class ReplayWatch:
    """What the daemon saw of the server: for a loss, the recorded cause (a restart, or the
    slot taken); never a restart before a request (`cache_cold` is an event, not a record)."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor

    async def before_request(
        self, sid: str, slot: str, messages: Sequence[ChatMessage]
    ) -> str | None:
        await trio.lowlevel.checkpoint()
        return None

    async def after_loss(self, sid: str, slot: str) -> tuple[str | None, str | None]:
        await trio.lowlevel.checkpoint()
        loss = self.cursor.record(2)
        if not isinstance(loss, CacheLossRecord) or loss.detail is None:
            return None, None
        if loss.cause is LossCause.SERVER_RESTARTED:
            return loss.detail.removeprefix("the server restarted: "), None
        if loss.cause is LossCause.SLOT_TAKEN:
            return None, loss.detail.removesuffix(" used the slot since")
        return None, None


def _nothing(place: Place) -> None:
    pass


_REFUSED = "the request exceeds the available context size (as recorded)"
_NO_SETTINGS = (
    "the turn's settings (the server's context size, thinking, the config's turn limits): "
    "its log was written by a loopd from before replay"
)
_NO_PIECES = (
    "the pieces a stopped stream came in (where the repetition watch stopped it): its log "
    "was written by a loopd from before replay"
)
