"""Faults from the server (SPEC section 13): every fault the fake can script, at every stage of a
turn, through loopd's channel, gives its documented outcome (SPEC section 4): a fault that may
pass is retried and the turn succeeds with no trace of it, or, if it persists past
`max_attempts`, the turn ends with `inference`; one that cannot pass ends the turn at once with
its code. Nothing is appended for the failed request (a message the server refuses for its
size on the turn's first request is not kept at all), and the next turn works.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio.testing

from boxmaker import proto as p
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply, Timing

from ..daemon.test_service import kinds, one_turn, open_daemon, turn
from ..soak import count

ATTEMPTS = 4  # [inference] max_attempts, the default
CLOCK = Reply(tool_calls=(("clock", "{}"),))

# Each fault, whether it is retried, and what the channel is told when it is not or persists.
FAULTS: list[tuple[str, Fault, bool, p.ErrorCode, str]] = [
    ("refused", Fault(FaultKind.REFUSED), True, p.ErrorCode.INFERENCE, "connect"),
    ("loading", Fault(FaultKind.LOADING), True, p.ErrorCode.INFERENCE, "503"),
    ("500", Fault(FaultKind.SERVER_ERROR), False, p.ErrorCode.INFERENCE, "answered 500"),
    ("401", Fault(FaultKind.STATUS, status=401), False, p.ErrorCode.INFERENCE, "401"),
    ("501", Fault(FaultKind.STATUS, status=501), False, p.ErrorCode.INFERENCE, "501"),
    ("context full", Fault(FaultKind.CONTEXT_FULL), False, p.ErrorCode.SESSION_FULL, "fit"),
    ("cut at once", Fault(FaultKind.CUT, after=0), True, p.ErrorCode.INFERENCE, "[DONE]"),
    ("cut mid-stream", Fault(FaultKind.CUT, after=3), True, p.ErrorCode.INFERENCE, "[DONE]"),
    ("error event", Fault(FaultKind.ERROR_EVENT, after=2), False, p.ErrorCode.INFERENCE, "diff"),
    ("stall connect", Fault(FaultKind.STALL, phase="connect"), True, p.ErrorCode.INFERENCE,
     "connect"),
    ("stall first byte", Fault(FaultKind.STALL, phase="first_byte"), True,
     p.ErrorCode.INFERENCE, "first_byte"),
    ("stall idle", Fault(FaultKind.STALL, phase="idle", after=2), True, p.ErrorCode.INFERENCE,
     "idle"),
]  # fmt: skip

# Where in a turn the fault strikes: the turn's first request, the one after a tool call, or
# the thinking cap's backstop (a runaway reasoning stream cancelled, the request sent again
# without thinking; the server here does not enforce the budget).
RUNAWAY = Reply(reasoning=" ".join(f"step{i}" for i in range(300)), content="Never seen.")
STAGES = {"first request": [], "after a tool call": [CLOCK], "the backstop's request": [RUNAWAY]}
BEFORE_FAULT = {"first request": ["user"],
                "after a tool call": ["user", "assistant", "usage", "call_sent", "tool_result"],
                "the backstop's request": ["user"]}  # fmt: skip
CONFIG = "[inference]\nthinking_cap = 64\n"


CASES = [
    pytest.param(fault, retried, code, says, stage, persists,
                 id=f"{name}, {stage}{', persists' if persists else ''}")
    for name, fault, retried, code, says in FAULTS
    for stage in STAGES
    for persists in ([False, True] if retried else [False])
]  # fmt: skip


@pytest.mark.parametrize(("fault", "retried", "code", "says", "stage", "persists"), CASES)
async def test_a_server_fault_at_each_stage_of_a_turn(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    fault: Fault,
    retried: bool,
    code: p.ErrorCode,
    says: str,
    stage: str,
    persists: bool,
) -> None:
    faults = [fault] * (ATTEMPTS if persists else 1)
    script = [Reply(content="First."), *STAGES[stage], *faults, Reply(content="Answer.")]
    script += [Reply(content="Next.")]
    fake = FakeLlamaServer(script=script, timing=Timing(enforce_budget=False))
    async with open_daemon(tmp_path, fake, CONFIG) as daemon:
        assert isinstance((await one_turn(daemon, turn()))[-1], p.TurnDoneFrame)
        frames = await one_turn(daemon, turn(resume=True))
        final = frames[-1]
        retries = [f for f in frames if isinstance(f, p.TurnEventFrame)
                   and isinstance(f.event, p.Retrying)]  # fmt: skip
        new = kinds(daemon)[
            5:
        ]  # after the first turn: session_start, user, assistant, usage, turn_end
        if stage == "the backstop's request":
            assert fake.disconnects >= 1  # the runaway stream was cancelled first
        if retried and not persists:  # passed on the next attempt: no trace of it but `retrying`
            assert final == p.TurnDoneFrame("Answer.", final.usage)  # type: ignore[union-attr]
            assert len(retries) == 1
            assert new == [*BEFORE_FAULT[stage], "assistant", "usage", "turn_end"]
            outcome = "retried, then turn_done"
        else:
            assert isinstance(final, p.WireError), final
            assert (final.code, len(retries)) == (code, ATTEMPTS - 1 if retried else 0)
            assert says in final.message, final.message
            if code is p.ErrorCode.SESSION_FULL and BEFORE_FAULT[stage] == ["user"]:
                assert new == []  # refused on the turn's first request: the message is not kept
            else:
                assert new == [*BEFORE_FAULT[stage], "turn_end"]  # nothing for the failed request
            outcome = final.code.value
        after = await one_turn(daemon, turn(resume=True))
        assert isinstance(after[-1], p.TurnDoneFrame), after[-1]
    count("server faults", outcome)
