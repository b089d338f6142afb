"""One turn: a user message in, an answer out, tool calls in between, and a limit on every
kind of runaway (SPEC section 6).

Decide, then do I/O: each step works out the record to write, the store writes it (durably)
and then the event goes to the channel. Nothing is written for a request until its completion
is final, so a failed or cancelled request leaves no trace; what was written stays, and the
session is usable for the next turn whatever way this one ends.
"""

from __future__ import annotations

import attrs
import trio
from attrs import frozen

from ...config import turn_config
from ...proto import (
    AssistantRecord,
    CacheLoss,
    CacheLossRecord,
    ChatMessage,
    Completion,
    Length,
    LogRecord,
    Mode,
    Origin,
    Outcome,
    Refusal,
    ResultResponse,
    SessionStartRecord,
    ToolCall,
    ToolCallStarted,
    ToolResult,
    ToolsOff,
    TurnSettings,
    Usage,
    UsageRecord,
    UserRecord,
    WrapUpReason,
)
from ...session import SessionError, mode_of, turn_end, undone_since_turn, unended_turn
from ...store import OpenSession
from ...tools import call_summary, failed
from ..cache import loss_record
from .ask import STOPPED, Asked, ask
from .calls import CanAsk, never, run_call
from .epochs import open_epoch, open_epoch_if_due
from .errors import SessionFailed, SessionFull, TurnError, TurnLimit
from .limits import Repeat, Stop, TurnLimits, WrapUp
from .recall import auto_recall
from .results import result_record
from .runtime import Carried, OnTurnEvent, Runtime, write
from .steer import Steer, hard_break, take_messages
from .too_long import after_refusal
from .tool_calls import completion_calls
from .words import FORKED, REPEATED, undone_note
from .wrap_up import ask_to_wrap_up

__all__ = ["TurnOutcome", "run_turn"]


@frozen
class TurnOutcome:
    content: str
    usage: Usage


async def run_turn(
    session: OpenSession,
    runtime: Runtime,
    content: str,
    on_event: OnTurnEvent,
    *,
    thinking: bool = True,
    steer: Steer | None = None,
    new_epoch: bool = False,
    can_ask: CanAsk = never,
    origin: Origin | None = None,
    untrusted: bool = False,
    mode: Mode | None = None,
    carried: Carried | None = None,
) -> TurnOutcome:
    """Run one turn of `session` for the user message `content`, in a new epoch first when
    one is due (or asked for: `new_epoch`), taking the soft breaks `steer` has at each step
    boundary; a call that needs the owner's approval is put to the owner if someone `can_ask`
    at that moment. `origin` is kept with the user message, and `untrusted` (its words are not
    the owner's: the conversation is tainted from it on). `mode`: the turn runs in it, not
    in the session's (a plan's read-only turn). `carried`: the files the message carries, kept
    in the session's folder before its `user` record names them.
    However it ends (cancelled too), its last record is a `turn_end` saying how, once its
    user message was written.

    Raises:
        SessionFull: the context-full 400; nothing appended for that request (a message
            that cannot fit is not kept at all: the turn leaves nothing).
        TurnLimit: a budget, too many tool iterations, or a second repeated call.
        InferFailed: any other inference failure, after the retries.
        SessionFailed: the store could not write (the log stays at a record boundary).
    """
    turn = _Turn(session, runtime, on_event, thinking, steer, new_epoch)
    turn.can_ask = can_ask
    turn.origin, turn.untrusted = origin, untrusted
    turn.own_mode = mode
    turn.carried = carried
    outcome = Outcome.CANCELLED  # unless it ends any other way
    answered: list[LogRecord] = []  # the closing answer's records, written with the turn_end
    try:
        with trio.move_on_after(runtime.config.loop.max_seconds):
            answer, answered = await turn.run(content)
            outcome = Outcome.DONE
            return answer
        raise TurnLimit(turn.limits.overtime().reason)
    except TurnError as error:
        outcome = error.outcome
        raise
    except SessionError as error:
        outcome = Outcome.INTERNAL
        raise SessionFailed(error) from error
    except Exception:
        outcome = Outcome.INTERNAL
        raise
    finally:
        if outcome is Outcome.CANCELLED and steer is not None and steer.hard:
            outcome = Outcome.STOPPED if steer.stopped else Outcome.BREAK_HARD
        turn.end(outcome, answered)


class _Turn:
    def __init__(
        self,
        session: OpenSession,
        runtime: Runtime,
        on_event: OnTurnEvent,
        thinking: bool,
        steer: Steer | None,
        new_epoch: bool,
    ) -> None:
        self.session = session
        self.rt = runtime
        self.on_event = on_event
        self.thinking = thinking
        self.steer = steer
        self.new_epoch = new_epoch
        self.limits = TurnLimits(runtime.config.loop, fenced=session.baseline.fenced is not None)
        self.started = runtime.timer()
        self.first: int | None = None  # where this turn's records start, once it has one
        self.sent: tuple[ChatMessage, ...] = ()  # the messages of the last request
        self.can_ask: CanAsk = never  # whether a question can be put to the owner now
        self.origin: Origin | None = None
        self.untrusted = False
        self.own_mode: Mode | None = None  # the channel's mode for this turn
        self.mode = Mode.AUTO  # what every call of it carries to brokerd
        self.carried: Carried | None = None  # the files its message carries

    async def run(self, content: str) -> tuple[TurnOutcome, list[LogRecord]]:
        """The turn's answer, and the records of its closing completion, which `end` writes
        with the `turn_end` in one write (one fsync before the answer goes out, not two)."""
        clock = self.rt.clock
        await trio.lowlevel.checkpoint_if_cancelled()
        if unended_turn(self.session.records, self.session.state.chained_from):
            self.session.heal(clock.now())  # the clock is read only for a record (replay)
        self.mode = self.own_mode or mode_of(self.session.records)  # no frame changes it now
        await open_epoch_if_due(self.session, self.rt, self.on_event, requested=self.new_epoch)
        asked = await self._first(content)
        wrapping = False
        while True:
            completion = asked.completion
            calls = completion_calls(self.session.baseline, completion)
            length = completion.finish_reason == "length"
            wrap_up = length and not wrapping and self.rt.config.loop.wrap_up_on_length
            # It ends the turn: an answer without calls, one asked for to close, or a stream
            # stopped for repeating itself.
            closing = completion.finish_reason == STOPPED or (
                not wrap_up and (wrapping or not calls)
            )
            records, usage, loss = await self._records(completion, asked.pieces)
            if not (closing and not calls):  # else written with the turn_end, by `end`
                await write(self.session, *records)
            if loss is not None:
                self.on_event(CacheLoss(loss.expected, loss.got, loss.cause, loss.detail))
            if length:
                self.on_event(Length(predicted_n=usage.predicted_n))
            if wrap_up:
                wrapping = True
                self.limits.after_completion(0, usage.predicted_n)  # its calls never run
                await ask_to_wrap_up(self.session, clock)
                asked = await self._ask()
                continue
            if closing:
                answer = TurnOutcome(content=self._answer(asked), usage=usage)
                return answer, [] if calls else records
            decision = self.limits.after_completion(len(calls), usage.predicted_n)
            if isinstance(decision, Stop):
                raise TurnLimit(decision.reason)
            reason = decision.reason if decision is not None else await self._run_tools(calls)
            if reason is not None:  # a fenced turn's tool use ends: a plain answer is asked
                wrapping = True
                self.on_event(ToolsOff(reason=reason))
                await ask_to_wrap_up(self.session, clock, reason)
            else:
                take_messages(self.session, self.steer, self.limits, self.on_event, clock)
            asked = await self._ask()

    def _answer(self, asked: Asked) -> str:
        """The closing completion's text; in a fenced session what of it was shown (never a
        tool's result in the model's place: that is the tool's word, not the answer)."""
        if self.session.baseline.fenced is None:
            return asked.completion.content or ""
        return asked.shown

    async def _run_tools(self, calls: tuple[ToolCall, ...]) -> WrapUpReason | None:
        """Run a completion's calls in order; the reason a fenced turn's tool use ends at one
        of them (it and the rest are then not run), else None.

        Raises:
            TurnLimit: a second repeated call.
        """
        for call in calls:
            self.on_event(ToolCallStarted(name=call.name, summary=call_summary(call.arguments)))
            decision = self.limits.before_call(call)
            if isinstance(decision, Stop):
                raise TurnLimit(decision.reason)
            if isinstance(decision, WrapUp):
                return decision.reason
            await self._run_tool(call, repeat=isinstance(decision, Repeat))
        return None

    async def _first(self, content: str) -> Asked:
        """Write the user message and ask for the turn's first completion. A message the
        server refuses for its size is taken back out of the log (`after_refusal`): then the
        turn leaves nothing, or, when the conversation before it is full, it is sent again
        once in a new epoch."""
        refused: Refusal | None = None
        for may_open in (True, False):
            before = self.session.state
            settings = attrs.evolve(await self._settings(), refused=refused)
            # Made durable once the request is out, at its first event (`ask`).
            now = self.rt.clock.now()
            user = UserRecord(now, content, self.origin, self.untrusted, settings, self._note())
            kept: list[str] = []  # the files this message brought into the session
            if (carried := self.carried) is not None:
                for sha256, source in carried.keep:  # linked, or a text written: in the loop
                    if self.session.files.keep(sha256, source):
                        kept.append(sha256)
                user = attrs.evolve(user, files=carried.files, attached=carried.attached)
            await write(self.session, user, durable=False)
            self.first = len(self.session.records) - 1
            alone = self.session.state
            if await auto_recall(self.session, self.rt, self.on_event, content):
                try:
                    return await self._ask()
                except SessionFull:  # the message may fit without what was recalled
                    self.session.cut_back(alone)
            try:
                return await self._ask()
            except SessionFull as full:
                self.session.cut_back(before)
                self.session.files.drop(kept)  # no record names them: nothing of it is kept
                self.first = None
                sent = "\n\n".join(part for part in (content, user.attached) if part)
                reason, refused = await after_refusal(
                    self.session, self.rt, full, sent, may_open=may_open
                )
                await open_epoch(self.session, self.rt, self.on_event, reason)
        raise AssertionError("after_refusal() raises on the second refusal")

    def _note(self) -> str:
        """loopd's words after the message: in a fork's first turn, what the fork does not
        carry (SPEC section 20); what the owner undid since the last turn (section 21)."""
        start = self.session.records[0]
        fork = start.fork if isinstance(start, SessionStartRecord) else None
        notes = [undone_note(undone_since_turn(self.session.records))]
        if fork is not None and self.session.index.turns == fork.turn:
            notes.insert(0, FORKED.format(session=fork.session.value, turn=fork.turn))
        return "\n".join(note for note in notes if note)

    async def _settings(self) -> TurnSettings:
        """What the turn runs with that its records do not say (replay reads it back)."""
        slot = self.session.slot
        return TurnSettings(
            n_ctx=await self.rt.client_of(slot).context_size(slot),
            thinking=self.thinking,
            new_epoch=self.new_epoch,
            config=turn_config(self.rt.config),
            mode=self.own_mode,
        )

    def end(self, outcome: Outcome, answered: list[LogRecord]) -> None:
        """Close the turn (no checkpoint: a cancelled turn still does): a result for each tool call
        it leaves without one ("interrupted, not run"), then its `turn_end`. A failure to write
        them fails a turn that was done; after any other ending they are left unsaid, and the
        next turn's healing writes them (outcome `interrupted`)."""
        if self.first is None or self.first >= len(self.session.records):
            return  # nothing of it was kept (a failed fsync took its message back out)
        now = self.rt.clock.now()
        closing: list[LogRecord] = [*answered, *self.session.healing(now)]
        if outcome in (Outcome.BREAK_HARD, Outcome.STOPPED):
            so_far = self.session.records[self.first :]
            closing.insert(0, hard_break(so_far, now, self.session.baseline))
        ms = round((self.rt.timer() - self.started) * 1000)
        turn = [*self.session.records[self.first :], *closing]
        closing.append(turn_end(turn, now, outcome, ms))
        try:
            self.session.append(*closing)  # no checkpoint: a cancelled turn still ends
        except SessionError as error:
            if outcome is Outcome.DONE:
                raise SessionFailed(error) from error

    async def _ask(self) -> Asked:
        self.sent = self.session.state.messages  # images named, as the replayed ones are
        return await ask(self.session, self.rt, self.on_event, thinking=self.thinking)

    async def _records(
        self, completion: Completion, pieces: tuple[int, ...]
    ) -> tuple[list[LogRecord], Usage, CacheLossRecord | None]:
        """The records of a completion: `assistant` and `usage` (an assistant record never
        stands without its usage), and `cache_loss` when the cache did not hold."""
        now, stopped = self.rt.clock.now, completion.finish_reason == STOPPED
        assistant = AssistantRecord(
            time=now(),
            content=completion.content,
            reasoning_content=completion.reasoning_content,
            tool_calls=completion.tool_calls,
        )
        timings = completion.timings
        usage = UsageRecord(
            time=now(),
            cache_n=timings.cache_n,
            prompt_n=timings.prompt_n,
            predicted_n=timings.predicted_n,
            reasoning_tokens=completion.reasoning_tokens,
            thinking_capped=completion.thinking_capped,
            stopped=STOPPED if stopped else None,
            length=completion.finish_reason == "length",
            cache_block=completion.cache_block,
            pieces=pieces if stopped else (),
        )
        loss = await loss_record(self.session, self.sent, completion, self.rt.watch, now)
        return [assistant, usage, *([loss] if loss else [])], usage.usage(), loss

    async def _run_tool(self, call: ToolCall, *, repeat: bool) -> None:
        # The number the result takes: the log's numbers have no gaps, so a resumed session
        # continues exactly where the counter was.
        number = self.session.state.next_call
        answer = failed(REPEATED) if repeat else await self._call(call, number)
        cap, now = self.rt.config.loop.tool_result_cap, self.rt.clock.now()
        await trio.lowlevel.checkpoint_if_cancelled()  # a whole result is kept only for a record
        record = result_record(self.session, call, number, answer, cap, now)
        await write(self.session, record)
        cut, is_error = record.truncated, record.is_error
        self.on_event(ToolResult(call.name, record.data_class, cut, is_error=is_error))

    async def _call(self, call: ToolCall, number: int) -> ResultResponse:
        return await run_call(
            self.session, self.rt, self.on_event, call, number, can_ask=self.can_ask, mode=self.mode
        )
