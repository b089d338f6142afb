"""Who may speak (issue 44, part 3), against the real homeserver: a stranger's messages cost
no turn and are told once; a stranger's invitation is declined; a room a stranger is in is
left; an encrypted room is told and left; a message over max_message_bytes runs nothing."""

from __future__ import annotations

from collections.abc import Callable

import trio
from bxdev.matrix_client import Event

from boxmaker.gatewayd.state import session_for

from .conftest import Account, MakeRig
from .rig import answer_of, answers_to, from_bot, membership, user_records

SCRIPT = {"replies": [], "default": {"content": "Yes, owner."}}


def left(room: str, user: str) -> Callable[[list[Event]], bool]:
    return lambda events: membership(events, room, user) == "leave"


async def test_a_stranger_s_flood_costs_no_turn_and_is_told_once(
    make_rig: MakeRig, stranger: Account
) -> None:
    rig = make_rig(matrix="allow_shared_rooms = true")
    bot = rig.bot.user_id
    with trio.fail_after(120):
        async with await rig.client() as owner, await rig.client(stranger) as other:
            room = await owner.create_room(invite=[stranger.user_id], is_direct=False)
            await other.join(room)
            await owner.invite(room, bot)
            await owner.wait_for(lambda events: membership(events, room, bot) == "join")
            for n in range(200):
                await other.send_text(room, f"do what I say {n}")
            asked = await owner.send_text(room, "ping")
            await answer_of(owner, asked, "Yes, owner.")
            history = [e | {"room_id": room} for e in await owner.messages(room)]
            told = from_bot(history, room, bot, "answers only its owner")
    assert len(told) == 1
    assert [r["content"] for r in user_records(rig.stack, session_for(room))] == ["ping"]


async def test_a_room_a_stranger_is_in_is_left(make_rig: MakeRig, stranger: Account) -> None:
    rig = make_rig()
    bot = rig.bot.user_id
    with trio.fail_after(60):
        async with await rig.client() as owner, await rig.client(stranger) as other:
            room = await owner.create_room(invite=[stranger.user_id], is_direct=False)
            await other.join(room)
            await owner.invite(room, bot)
            await owner.wait_for(left(room, bot), what="the bot leaving")
            assert from_bot(owner.events, room, bot, "does not stay in rooms shared")
            await other.send_text(room, "hello?")
    assert not (rig.stack.home / "sessions" / session_for(room)).exists()


async def test_a_stranger_s_invitation_is_declined(make_rig: MakeRig, stranger: Account) -> None:
    rig = make_rig()
    with trio.fail_after(60):
        async with await rig.client(stranger) as other:
            room = await other.create_room(invite=[rig.bot.user_id])
            await other.wait_for(left(room, rig.bot.user_id), what="the invitation declined")
            assert rig.bot.user_id not in await other.joined_members(room)
            joins = [
                e for e in await other.messages(room, types=("m.room.member",))
                if e.get("state_key") == rig.bot.user_id and e["content"]["membership"] == "join"
            ]  # fmt: skip
            assert joins == []  # declined, never joined (and left for the stranger's company)


async def test_an_encrypted_room_is_told_and_left(make_rig: MakeRig) -> None:
    rig = make_rig()
    bot = rig.bot.user_id
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await owner.create_room(invite=[bot], encrypted=True)
            await owner.wait_for(left(room, bot), what="the bot leaving")
            (told,) = bot_said = from_bot(owner.events, room, bot, "")
            assert "encrypted" in told["content"]["body"]
            assert len(bot_said) == 1  # nothing of a conversation
    assert not (rig.stack.home / "sessions" / session_for(room)).exists()


async def test_a_message_over_max_message_bytes_runs_nothing(make_rig: MakeRig) -> None:
    rig = make_rig(extra="max_message_bytes = 1000")
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            too_long = await owner.send_text(room, "é" * 500 + "x")  # 1,001 bytes
            fits = await owner.send_text(room, "x" * 1000)
            await answer_of(owner, fits, "Yes, owner.")
            await owner.wait_for(lambda events: bool(answers_to(events, too_long)))
            (refused,) = answers_to(owner.events, too_long)
    assert "1,001 bytes, over the 1,000" in refused["content"]["body"]
    assert [r["content"] for r in user_records(rig.stack, session_for(room))] == ["x" * 1000]
