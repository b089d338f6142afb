"""Exactly once (issue 44, part 7), against the real homeserver: after `kill -9` of gatewayd at
random points, a restart of the homeserver mid-turn, or loopd stopped while messages wait,
every owner message is answered exactly once: none dropped, none run twice."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from bxdev.matrix_client import Event, MatrixClient
from bxdev.synapse import Synapse

from boxmaker.gatewayd.state import session_for

from ..processes import wait_until
from .conftest import Account, MakeRig
from .rig import (
    GatewayRig,
    answer_of,
    answers_to,
    from_bot,
    membership,
    pending_count,
    user_records,
)

SCRIPT = {"replies": [], "default": {"content": "Answered."}}
KILLS = 20


@pytest.fixture
def rig(tmp_path: Path, synapse: Synapse, bot: Account, owner: Account) -> Iterator[GatewayRig]:
    running = GatewayRig(tmp_path, synapse, bot, owner, SCRIPT, fake_args=("--ms-per-token", "20"))
    try:
        running.start_gatewayd()
        yield running
    finally:
        running.stop()


async def each_answered_once(owner: MatrixClient, room: str, asked: list[str]) -> None:
    def all_answered(events: list[Event]) -> bool:
        return all(answers_to(events, event) for event in asked)

    await owner.wait_for(all_answered, timeout=120, what="an answer to every message")
    history = [e | {"room_id": room} for e in await owner.messages(room)]
    for event in asked:
        assert len(answers_to(history, event)) == 1, event


def origins_run(rig: GatewayRig, room: str) -> list[str]:
    return [r["origin"]["id"] for r in user_records(rig.stack, session_for(room))]


async def test_kill_9_at_random_points_answers_each_message_once(rig: GatewayRig) -> None:
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    print(f"seed {seed}")
    asked: list[str] = []
    with trio.fail_after(400):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            for n in range(KILLS):
                asked.append(await owner.send_text(room, f"Message {n}."))
                await trio.sleep(rng.uniform(0, 0.6))  # a random point: before, in, after a turn
                rig.kill_gatewayd()
                rig.start_gatewayd()
            await each_answered_once(owner, room, asked)
            wait_until(lambda: pending_count(rig) == 0, "no message pending")
    assert sorted(origins_run(rig, room)) == sorted(asked)  # each ran once


async def test_the_homeserver_restarted_mid_turn(rig: GatewayRig, synapse: Synapse) -> None:
    with trio.fail_after(120):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            rig.stack.hold()
            asked = await owner.send_text(room, "Through a restart.")
            wait_until(lambda: bool(user_records(rig.stack, session_for(room))), "the turn")
            synapse.stop()
            rig.stack.release()
            wait_until(
                lambda: rig.stack.log(session_for(room))[-1]["type"] == "turn_end", "its end"
            )
            synapse.start()
            await answer_of(owner, asked, "Answered.", timeout=90)
            await each_answered_once(owner, room, [asked])
    assert origins_run(rig, room) == [asked]


async def test_messages_wait_while_loopd_is_down(rig: GatewayRig) -> None:
    with trio.fail_after(120):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            rig.stack.loopd.stop()
            asked = [await owner.send_text(room, f"While down {n}.") for n in range(2)]
            await owner.wait_for(
                lambda events: bool(from_bot(events, room, rig.bot.user_id, "not running")),
                what="the owner told the agent is not running",
            )
            rig.stack.loopd = rig.stack.start_loopd()
            rig.stack.loopd.err.wait_for("listening on")
            await each_answered_once(owner, room, asked)
            history = [e | {"room_id": room} for e in await owner.messages(room)]
    assert len(from_bot(history, room, rig.bot.user_id, "not running")) == 1
    assert origins_run(rig, room) == asked


async def test_a_turn_loopd_s_restart_closed_is_told_never_run_again(rig: GatewayRig) -> None:
    with trio.fail_after(120):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            rig.stack.hold()
            asked = await owner.send_text(room, "Cut short.")
            wait_until(lambda: bool(user_records(rig.stack, session_for(room))), "the turn")
            os.kill(rig.stack.loopd.popen.pid, signal.SIGKILL)
            rig.stack.loopd.stop()
            rig.stack.release()
            rig.stack.loopd = rig.stack.start_loopd()
            rig.stack.loopd.err.wait_for("listening on")
            await owner.wait_for(lambda events: bool(answers_to(events, asked)), what="a word")
            told = answers_to(owner.events, asked)
            later = await owner.send_text(room, "After.")
            await answer_of(owner, later, "Answered.")
    assert "restarted while this ran" in told[0]["content"]["body"]
    assert origins_run(rig, room) == [asked, later]  # the first never ran again


async def test_a_gap_longer_than_a_sync_brings_is_paged_back(
    make_rig: MakeRig, stranger: Account
) -> None:
    """While gatewayd is down, more is said in the room than one /sync brings (1,000 events a
    room): the owner's message before the flood is fetched back and answered, once."""
    rig = make_rig(matrix="allow_shared_rooms = true")
    bot = rig.bot.user_id
    with trio.fail_after(240):
        async with await rig.client() as owner, await rig.client(stranger) as other:
            room = await owner.create_room(invite=[stranger.user_id, bot], is_direct=False)
            await other.join(room)
            await owner.wait_for(lambda events: membership(events, room, bot) == "join")
            await answer_of(owner, await owner.send_text(room, "Before."), "Answered.")
            rig.stop_gatewayd()
            early = await owner.send_text(room, "Buried under a flood.")
            for n in range(1050):
                await other.send_text(room, f"noise {n}")
            late = await owner.send_text(room, "After the flood.")
            rig.start_gatewayd()
            await each_answered_once(owner, room, [early, late])
    assert origins_run(rig, room)[1:] == [early, late]
