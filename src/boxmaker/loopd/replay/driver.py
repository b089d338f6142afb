"""`replay`: a recorded session's turns run again through the real loop (`run_turn`, the
epoch switch, the fenced parser, the limits) with everything the world said answered from the
log, into a scratch copy, and the copy compared with the recording line by line (SPEC section
20). No server, no brokerd, no socket: the stand-ins (`stand_ins.py`, `recorded_tools.py`)
answer.

Each run is started as the daemon started it: its message, origin and trust from its `user`
record, thinking, a new epoch asked for and the config's turn settings from that record's
`settings` (or, with a config of the owner's, that config's). A run the recording shows cut
short is cut at the same place: by its hard break or `stop`, its channel gone, its time limit
(the mock clock jumps to it), a failed request, or loopd stopping (what it wrote after the
cut is taken back, and healed as the recording healed it).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, cast

import attrs
import trio

from ... import layout
from ...config import Config, with_turn_config
from ...proto import (
    Baseline,
    DecodeError,
    EpochEndRecord,
    ModeRecord,
    Outcome,
    SessionId,
    ToolResultRecord,
    TurnEndRecord,
    TurnEvent,
    UndoRecord,
    UserRecord,
)
from ...session import INTERRUPTED, SessionState, open_reason, parse_baseline, unended_turn
from ...store import Store
from ..infer import Client, Connect, Http
from ..loop import Runtime, TurnError, open_epoch, run_turn
from .compare import difference, first_difference
from .errors import Gap, MissingInput, ReplayError
from .recorded_tools import ReplayApprovals, ReplayPort, recorded_files
from .report import Report
from .scratch import copy_scratch, scratch_lines
from .stand_ins import Cursor, ReplayClient, ReplayClock, ReplaySteer, ReplayTimer, ReplayWatch
from .step import Request
from .tape import Place, Run, Tape

__all__ = ["replay", "select_runs", "start_of"]


def select_runs(
    tape: Tape, *, turn: int | None = None, since: int | None = None, epoch: int | None = None
) -> list[Run]:
    """The runs asked for: one turn, the turns from one on, an epoch's, or all.

    Raises:
        ValueError: naming a turn or an epoch the session does not have.
    """
    runs = list(tape.runs)
    if turn is not None or since is not None:
        number = turn if turn is not None else since
        assert number is not None
        if not 1 <= number <= len(runs):
            raise ValueError(f"the session has turns 1 to {len(runs)}, not {number}")
        return runs[number - 1 : number] if turn is not None else runs[number - 1 :]
    if epoch is not None:
        if not 0 <= epoch < len(tape.epochs):
            raise ValueError(f"the session has epochs 0 to {len(tape.epochs) - 1}, not {epoch}")
        return [run for run in runs if run.user[0] == epoch]
    return runs


async def replay(
    folder: Path,
    runs: Sequence[Run],
    tape: Tape,
    config: Config,
    *,
    own_config: bool = False,
    deadline: float | None = None,
    requests: list[Request] | None = None,
) -> Report:
    """Replay `runs` (consecutive) of the session in `folder`, recorded as `tape`, and compare.
    `config` gives what a turn reads besides its recorded settings; with `own_config` its own
    turn settings are used instead of the recorded ones. Runs under a mock clock that jumps
    (a time limit falls at once); past `deadline` (`time.monotonic()`), no further turn is
    begun and the report says so."""
    sid = folder.name
    if not runs:
        return Report(sid, 0, 0)
    first = runs[0]
    start = start_of(tape, first)
    with tempfile.TemporaryDirectory(prefix="boxmaker-replay-") as temporary:
        home = Path(temporary)
        copy = copy_scratch(folder, home, start, tape)
        replaying = _Replay(folder, copy, tape, start, config, own_config)
        replaying.cursor.requests = requests
        return await replaying.run(runs, deadline)


def start_of(tape: Tape, first: Run) -> Place:
    """Where the replay of `first` starts writing: after the run before it (its healing and
    the epoch switch `first` made are written again), else at its message."""
    before = first.number - 2
    if before < 0:
        return first.user
    epoch, index = tape.runs[before].last
    return epoch, index + 1


class _Replay:
    def __init__(
        self, folder: Path, copy: Path, tape: Tape, start: Place, config: Config, own: bool
    ) -> None:
        self.tape, self.copy, self.config, self.own = tape, copy, config, own
        self.cursor = Cursor(tape, folder)
        self.clock = ReplayClock(self.cursor)
        self.timer = ReplayTimer()
        self.approvals = ReplayApprovals(self.cursor)
        self.compared = start  # the next recorded line to compare
        self.offsets = {start[0]: sum(len(line) + 1 for line in tape.lines[start[0]][: start[1]])}
        self.lines = 0

    async def run(self, runs: Sequence[Run], deadline: float | None) -> Report:
        sid = self.copy.name
        store = Store(self.copy.parent.parent, self.clock, memory=self._memory)
        session = store.resume(SessionId(sid))
        cut_back = session.cut_back

        def cut_back_afresh(to: SessionState) -> None:
            """A record taken back took its clock reading with it (a refused message's, a
            recall sent without): the next reading is the next record's, as recorded."""
            cut_back(to)
            self.clock.reset()

        session.cut_back = cut_back_afresh  # type: ignore[method-assign]
        self.cursor.session = session
        try:
            for count, run in enumerate(runs, 1):
                if deadline is not None and time.monotonic() > deadline:
                    return Report(sid, count - 1, self.lines, None, _OVERTIME, run.user)
                found = await self._run(run)
                if found is not None:
                    return attrs.evolve(found, runs=count, lines=self.lines, turn=run.number)
        except MissingInput as missing:
            return Report(sid, 0, self.lines, None, missing.what, missing.place)
        finally:
            session.close()
        return Report(sid, len(runs), self.lines)

    async def _run(self, run: Run) -> Report | None:
        session = self.cursor.session
        assert session is not None
        self._heal()
        self._owner_acts()
        self.cursor.run = run
        user = self.tape.at(run.user)
        assert isinstance(user, UserRecord)
        if user.settings is None:
            raise MissingInput(run.user, _NO_SETTINGS)
        settings = user.settings
        config = self.config if self.own else with_turn_config(self.config, settings.config)
        runtime = Runtime(
            config,
            cast(Client, ReplayClient(self.cursor)),
            ReplayPort(self.cursor),
            self.clock,
            watch=ReplayWatch(self.cursor),
            approvals=cast(object, self.approvals),  # type: ignore[arg-type]
            timer=self.timer,
        )
        while self._orphan_switch(run, config):  # a message refused there was not kept
            await open_epoch(session, runtime, _ignore, "a refused message (replayed)")
            self._owner_acts()  # made after the turn whose message the switch was for
        end = self.tape.at(run.end) if run.end is not None else None
        outcome = end.outcome if isinstance(end, TurnEndRecord) else None
        self.timer.begin(end.ms if isinstance(end, TurnEndRecord) else 0)
        steer = ReplaySteer(self.cursor)
        # Checked before the run (a missing file is no difference); the scratch copy holds them.
        recorded = recorded_files(self.cursor.folder, run.user, user)
        carried = attrs.evolve(recorded, keep=()) if recorded is not None else None
        self.cursor.run = run
        kept: list[SessionState] = []  # a crashed run's state when it was cut
        with trio.CancelScope() as scope:

            def cut() -> bool:
                """End the run as the recording's was ended from outside, here; whether
                it was."""
                if scope.cancel_called:
                    return True
                if run.crashed:  # loopd stopped here: what the turn writes next is taken back
                    kept.append(session.state)
                elif outcome in (Outcome.BREAK_HARD, Outcome.STOPPED):
                    steer.hard, steer.stopped = True, outcome is Outcome.STOPPED
                elif outcome is not Outcome.CANCELLED:
                    return False
                scope.cancel()
                return True

            def reading(place: Place) -> None:
                if place == run.cut:  # the record the cut kept from being written
                    cut()

            async def stuck(what: str) -> NoReturn:
                if outcome is Outcome.INFERENCE:
                    raise Connect(f"the recorded turn's request failed here ({what})")
                if outcome is Outcome.SESSION_FULL:
                    raise Http(400, _CONTEXT_FULL)
                if not cut() and outcome is not Outcome.TURN_LIMIT:  # its time limit falls
                    raise self.cursor.failed(Gap(self.cursor.place, what))
                await trio.sleep_forever()
                raise AssertionError("cancelled")

            self.cursor.stuck, self.cursor.reading = stuck, reading
            try:
                await run_turn(
                    session,
                    runtime,
                    user.content,
                    _ignore,
                    thinking=settings.thinking,
                    steer=steer,
                    new_epoch=settings.new_epoch,
                    can_ask=self.approvals.can_ask,
                    origin=user.origin,
                    untrusted=user.untrusted,
                    mode=settings.mode,
                    carried=carried,
                )
            except TurnError:
                pass  # its outcome is in its turn_end, compared below
            except ReplayError:
                pass  # kept by the cursor, below
        failure, self.cursor.failure = self.cursor.failure, None
        if isinstance(failure, MissingInput):
            raise failure
        gap = failure
        if kept:
            session.cut_back(kept[0])
        upto = run.last if gap is None else None
        return self._compare(upto, gap)

    def _orphan_switch(self, run: Run, config: Config) -> bool:
        """Whether the recording switches epochs here, before `run`, where `run` would not:
        a turn that left nothing but the switch (its message refused in the new epoch too,
        or the turn stopped once the switch it asked for was made)."""
        record, session = self.cursor.record(), self.cursor.session
        if not isinstance(record, EpochEndRecord) or session is None:
            return False
        if run.user[0] > record.epoch + 1:
            return True  # another switch comes before the run's message
        opened = self.tape.epochs[record.epoch + 1][: run.user[1]]
        if any(isinstance(r, ModeRecord | UndoRecord) for r in opened):
            return True  # the owner acted after the switch: an earlier turn made it
        user = self.tape.at(run.user)
        assert isinstance(user, UserRecord)
        assert user.settings is not None
        settings = user.settings
        if settings.new_epoch or settings.refused is not None:
            return False
        epoch_at = config.context.epoch_at
        return open_reason(session.records, session.state.head, settings.n_ctx, epoch_at) is None

    def _owner_acts(self) -> None:
        """Write the owner's acts the recording has here, between two turns (a mode set, an
        undo: SPEC section 21): they are inputs, as the owner gave them; the next turn's
        note and the mode its calls carry are the loop's, and compared."""
        session = self.cursor.session
        assert session is not None
        while isinstance(record := self.cursor.record(), ModeRecord | UndoRecord):
            self.clock.reset()
            session.append(record)

    def _heal(self) -> None:
        """Write the healing the recording has here (a turn loopd stopped in, closed when it
        started again or by the next turn)."""
        session = self.cursor.session
        assert session is not None
        if not unended_turn(session.records, session.state.chained_from):
            return
        record = self.cursor.record()
        healing = (isinstance(record, ToolResultRecord) and record.content == INTERRUPTED) or (
            isinstance(record, TurnEndRecord) and record.outcome is Outcome.INTERRUPTED
        )
        if healing:
            self.clock.reset()
            session.heal(self.clock.now())

    def _compare(self, upto: Place | None, gap: ReplayError | None) -> Report | None:
        """Compare what the replay wrote since the last comparison with the recording up to
        `upto` (its last line of the run; with a `gap`, up to where the replay stopped)."""
        replayed = self._replayed()
        if gap is not None:
            upto = replayed[-1][0] if replayed else None
        recorded = self._recorded(upto)
        found = first_difference(recorded, replayed, settings=not self.own)
        sid = self.copy.name
        if found is None and gap is not None:
            line = self.tape.lines[gap.place[0]][gap.place[1]] if self.tape.at(gap.place) else None
            found = difference((gap.place, line) if line else None, None, gap.what)

        if found is not None:
            return Report(sid, 0, self.lines, found)
        self.lines += len(recorded)
        if recorded:
            epoch, index = recorded[-1][0]
            self.compared = (epoch, index + 1)
        return None

    def _replayed(self) -> list[tuple[Place, bytes]]:
        """The lines the replay wrote since the last comparison, with their places."""
        session = self.cursor.session
        assert session is not None
        lines: list[tuple[Place, bytes]] = []
        for epoch in range(self.compared[0], session.epoch + 1):
            first = self.compared[1] if epoch == self.compared[0] else 0
            new, self.offsets[epoch] = scratch_lines(self.copy, epoch, self.offsets.get(epoch, 0))
            lines += [((epoch, first + at), line) for at, line in enumerate(new)]
        return lines

    def _recorded(self, upto: Place | None) -> list[tuple[Place, bytes]]:
        lines: list[tuple[Place, bytes]] = []
        if upto is None:
            return lines
        for epoch in range(self.compared[0], upto[0] + 1):
            first = self.compared[1] if epoch == self.compared[0] else 0
            last = upto[1] if epoch == upto[0] else len(self.tape.lines[epoch]) - 1
            lines += [((epoch, at), self.tape.lines[epoch][at]) for at in range(first, last + 1)]
        return lines

    def _memory(self) -> str:
        """The memory the recording's next epoch's baseline held (for the switch's baseline)."""
        session = self.cursor.session
        assert session is not None
        path = self.cursor.folder / layout.baseline_name(session.epoch + 1)
        try:
            baseline: Baseline | None = parse_baseline(path.read_bytes())
        except (OSError, DecodeError):
            baseline = None
        memory = baseline.memory if baseline is not None else None
        return memory if memory is not None else session.baseline.memory or ""


def _ignore(event: TurnEvent) -> None:
    pass


_OVERTIME = "time: the replay ran out of the time it was given before this turn"
# What the server answered: the request no longer fits its context (the sizes are not kept).
_CONTEXT_FULL = (
    '{"error":{"code":400,"type":"exceed_context_size_error",'
    '"message":"the request exceeds the available context size (replayed)"}}'
)
_NO_SETTINGS = (
    "the turn's settings (the server's context size, thinking, the config's turn limits): "
    "its log was written by a loopd from before replay"
)
