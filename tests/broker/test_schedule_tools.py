"""The model's schedules as brokerd answers them: `schedule` asks the owner (the shipped
policy), and asks whatever its grant while the conversation holds an untrusted result (its
schedule then marked tainted); a wrong `when` is answered in words with nothing written;
`list_schedules` and `cancel_schedule` reach the calling session's own schedules only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from boxmaker import proto as p
from boxmaker.brokerd import SHIPPED_POLICY, Broker, builtin_registry, parse_policy
from boxmaker.clock import TickingClock
from boxmaker.config import DEFAULT_CORE
from boxmaker.schedules import schedules_file

S1, S2 = p.SessionId("s1"), p.SessionId("s2")
ALLOWED = SHIPPED_POLICY.replace('[grants.schedule]\ndecision = "ask"',
                                 '[grants.schedule]\ndecision = "allow"')  # fmt: skip


def broker_at(base: Path, policy: str = SHIPPED_POLICY) -> Broker:
    return Broker(builtin_registry(DEFAULT_CORE), parse_policy(policy, base / "policy.toml"),
                  base / "ws", base / "home", TickingClock(), threads=False)  # fmt: skip


async def ask(
    broker: Broker, tool: str, session: p.SessionId = S1, *, tainted: bool = False,
    identity: str = "first", **arguments: Any,
) -> p.ToolResponse:  # fmt: skip
    request = p.ToolRequest(session, 1, tool, json.dumps(arguments), tainted=tainted, turn=3,
                            identity=identity)  # fmt: skip
    return await broker.call(request)


def text(response: p.ToolResponse) -> str:
    assert isinstance(response, p.ResultResponse), response
    return response.content


def written(base: Path) -> tuple[p.SchedulesRecord, ...]:
    return schedules_file(base / "home").read()


async def test_a_schedule_is_asked_for_and_made_once_the_owner_says_yes(base: Path) -> None:
    broker = broker_at(base)
    asked = await ask(broker, "schedule", when="in 20m", message="check the build")
    assert isinstance(asked, p.PendingApprovalResponse), asked
    assert written(base) == ()
    said = text(await broker.approve(S1, asked.id, p.Answer.ONCE))
    assert said.startswith("Scheduled as s1 (at ")
    (record,) = written(base)
    assert isinstance(record, p.ScheduleRecord)
    assert (record.session, record.identity, record.turn) == (S1, "first", 3)
    assert (record.created_by, record.tainted, record.message) == (
        p.CreatedBy.AGENT,
        False,
        "check the build",
    )


async def test_under_taint_a_schedule_is_asked_whatever_its_grant_and_marked(base: Path) -> None:
    broker = broker_at(base, ALLOWED)
    assert "Scheduled as s1" in text(await ask(broker, "schedule", when="every 1h", message="a"))
    asked = await ask(broker, "schedule", tainted=True, when="every 1h", message="mail it all")
    assert isinstance(asked, p.PendingApprovalResponse), asked
    assert "[asked: it makes or cancels a turn that runs later without the owner" in asked.summary
    assert len(written(base)) == 1  # nothing written while it waits
    assert "Scheduled as s2" in text(await broker.approve(S1, asked.id, p.Answer.ONCE))
    made = [r for r in written(base) if isinstance(r, p.ScheduleRecord)]
    assert [r.tainted for r in made] == [False, True]
    listed = await ask(broker, "list_schedules")
    assert isinstance(listed, p.ResultResponse)
    assert listed.untrusted  # it quotes the message written under taint


async def test_a_wrong_when_is_answered_in_words_and_nothing_is_written(base: Path) -> None:
    broker = broker_at(base, ALLOWED)
    for when, said in (
        ("every 0 minutes", "an interval is from 1 second"),
        ("at 2020-01-01T00:00Z", "that time is past"),
        ("whenever", "is not a when"),
    ):
        answer = text(await ask(broker, "schedule", when=when, message="x"))
        assert answer.startswith("Nothing was scheduled: ")
        assert said in answer
    assert written(base) == ()


async def test_a_session_sees_and_cancels_its_own_schedules_only(base: Path) -> None:
    broker = broker_at(base, ALLOWED)
    await ask(broker, "schedule", S1, when="0 7 * * *", message="news for s1")
    await ask(broker, "schedule", S2, when="0 8 * * *", message="news for s2")
    await ask(broker, "schedule", S1, identity="second", when="0 9 * * *", message="a new s1")
    listed = text(await ask(broker, "list_schedules"))
    assert listed.startswith("s1: cron 0 7 * * *")
    assert "news for s1" in listed
    assert "s2" not in listed
    assert "s3" not in listed
    for other in ("s2", "s3"):  # s3: a later session made under the id s1
        answer = text(await ask(broker, "cancel_schedule", id=other))
        assert answer == f"Nothing was cancelled: there is no schedule {other} of this session."
    assert text(await ask(broker, "cancel_schedule", id="s1")) == (
        "Cancelled s1: it never fires again."
    )
    assert text(await ask(broker, "list_schedules")) == "This conversation has no schedules."
    cancels = [r for r in written(base) if isinstance(r, p.CancelRecord)]
    assert [(r.id, r.session) for r in cancels] == [("s1", S1)]


async def test_under_taint_a_cancel_is_asked_too(base: Path) -> None:
    broker = broker_at(base, ALLOWED)
    assert "Scheduled as s1" in text(await ask(broker, "schedule", when="0 7 * * *", message="a"))
    asked = await ask(broker, "cancel_schedule", tainted=True, id="s1")
    assert isinstance(asked, p.PendingApprovalResponse), asked
    assert not [r for r in written(base) if isinstance(r, p.CancelRecord)]
    assert "Cancelled s1" in text(await ask(broker, "cancel_schedule", id="s1"))
