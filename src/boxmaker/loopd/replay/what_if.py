"""`bxctl replay SESSION --with profile=P | server=NAME | config=FILE`: the session's messages
sent again, live, to another model, profile or config, into a session of its own, and the
two conversations set side by side, turn by turn (SPEC section 20).

The model answers for real (the server named, or the session's under another profile). A tool
call the recording holds, the same tool with the same arguments, is answered with the recorded
result (its class and trust kept); any other is not run ("not run in a replay"), unless
`live_tools`, when brokerd answers it under its policy. The new session is marked as a what-if
(`session_start.what_if`) and left out of recall.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import attrs

from ... import layout
from ...clock import SystemClock
from ...config import DEFAULT_SERVER, Config
from ...profiles import load_profile
from ...proto import (
    AssistantRecord,
    DataClass,
    LogRecord,
    RecallFrame,
    ResultResponse,
    SessionId,
    ToolRequest,
    ToolResponse,
    ToolResultRecord,
    TurnEvent,
    TurnSettings,
    UserRecord,
)
from ...session import parse_baseline
from ...store import Store, read_baseline
from ...tools import Port, ToolPort, local
from ..infer import Client
from ..loop import Runtime, TurnError, run_turn
from ..loop.tool_calls import decide
from .recorded_tools import recorded_files
from .sides import TurnSide, WhatIf, recorded_side
from .tape import Run, Tape

__all__ = ["NOT_RUN", "RecordedTools", "what_if"]

NOT_RUN = (
    "Not run: this conversation is a replay (bxctl replay --with), and the recording holds no "
    "call of this tool with these arguments."
)


class RecordedTools:
    """brokerd, in a what-if: the recorded result of the same call, else not run (or, with
    `live`, brokerd's own answer)."""

    def __init__(self, tape: Tape, baseline_of: Sequence[object], live: ToolPort | None):
        self.live = live
        self.results: dict[tuple[str, str], ResultResponse] = {}
        for epoch, records in enumerate(tape.epochs):
            baseline = baseline_of[epoch]
            calls = {
                call.id: call
                for record in records
                if isinstance(record, AssistantRecord)
                for call in record.tool_calls or ()
            }
            for record in records:
                if not isinstance(record, ToolResultRecord):
                    continue
                call = calls.get(record.tool_call_id)
                decided = decide(baseline, call) if call is not None else None  # type: ignore[arg-type]
                if isinstance(decided, Port):
                    key = (decided.tool, _canonical(decided.arguments))
                    self.results.setdefault(
                        key,
                        ResultResponse(record.content, record.data_class, record.untrusted, False),
                    )

    async def call(self, request: ToolRequest) -> ToolResponse:
        found = self.results.get((request.tool, _canonical(request.arguments)))
        if found is not None:
            return found
        if self.live is not None:
            return await self.live.call(request)
        return local(NOT_RUN)

    async def approve(self, session: SessionId, id: str, answer: object) -> ToolResponse:
        assert self.live is not None  # only brokerd asks
        return await self.live.approve(session, id, answer)  # type: ignore[arg-type]

    async def auto_recall(self, frame: RecallFrame) -> ToolResponse:
        return ResultResponse("", DataClass.PUBLIC, untrusted=False, truncated=False)

    async def session_changed(self, session: SessionId) -> None:
        return None


async def what_if(
    home: Path,
    folder: Path,
    tape: Tape,
    runs: Sequence[Run],
    config: Config,
    *,
    profile: str | None = None,
    server: str | None = None,
    changed: str,
    live: ToolPort | None = None,
) -> WhatIf:
    """Send the messages of `runs` again under `config` (to `server`, under `profile`) into a
    new session of `home`, and set each turn beside the recorded one.

    Raises:
        KeyError: no server of that name in the config.
        ProfileError: no profile of that name.
        SessionError: the new session could not be made.
    """
    baselines = [parse_baseline((folder / layout.baseline_name(e)).read_bytes())
                 for e in range(len(tape.epochs))]  # fmt: skip
    name = server or DEFAULT_SERVER
    config.server_config(name)  # KeyError for an unknown one
    if name != DEFAULT_SERVER:
        config = attrs.evolve(config, slot_servers={**config.slot_servers, "main": name})
    chosen = load_profile(profile) if profile is not None else None
    clock = SystemClock()
    store = Store(home, clock)
    if chosen is not None:
        baseline = read_baseline(config.baseline.system, "", chosen, config.tools.core)
    else:
        baseline = baselines[0]
    made = SessionId(f"whatif-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}")
    session = store.create(made, baseline, "main", what_if=SessionId(folder.name))
    port = RecordedTools(tape, baselines, live)
    sides: list[tuple[str, TurnSide, TurnSide]] = []
    try:
        async with Client(config, server=name, profile=chosen) as client:
            runtime = Runtime(config, client, port, clock)
            for run in runs:
                user = tape.at(run.user)
                assert isinstance(user, UserRecord)
                first = len(session.records)
                settings = user.settings or TurnSettings()
                with contextlib.suppress(TurnError):  # its outcome is in its turn_end
                    await run_turn(
                        session,
                        runtime,
                        user.content,
                        _ignore,
                        thinking=settings.thinking,
                        mode=settings.mode,  # a plan's read-only turn stays one
                        carried=recorded_files(folder, run.user, user),  # kept in the new one
                    )
                recorded = _run_records(tape, run)
                mine = session.records[first:]
                old, new = (
                    recorded_side(recorded, baselines[run.user[0]]),
                    recorded_side(mine, session.baseline),
                )
                sides.append((user.content, old, new))
    finally:
        session.close()
    return WhatIf(folder.name, made.value, changed, tuple(sides))


def _run_records(tape: Tape, run: Run) -> list[LogRecord]:
    epoch, index = run.user
    last = run.end or run.last
    return list(tape.epochs[epoch][index : last[1] + 1])


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments


def _ignore(event: TurnEvent) -> None:
    pass
