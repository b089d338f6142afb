"""Rooms are sessions, and the answer as it streams (issue 44, parts 4 and 5), against the real
homeserver: a message mid-turn is a soft break; `!new` and `!stop`; an answer longer than one
event is split, whole; a tool call is a line of its own."""

from __future__ import annotations

import json
from typing import Any

import trio
from bxdev.matrix_client import edits_of

from boxmaker.gatewayd.state import session_for

from ..processes import wait_until
from .conftest import MakeRig
from .rig import (
    GatewayRig,
    answer_of,
    answers_to,
    bot_messages,
    from_bot,
    latest_text,
    user_records,
)

SCRIPT = {"replies": [], "default": {"content": "?"}}
CLOCK = {"tool_calls": [["clock", json.dumps({})]]}
LONG = "".join(f"Line {n}: {'é' * 60} `code` and **bold**.\n" for n in range(600))


async def test_a_message_mid_turn_is_a_soft_break(make_rig: MakeRig) -> None:
    rig = make_rig({"replies": [CLOCK, {"content": "Both answered."}], "default": {"content": "?"}})
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            rig.stack.hold()  # the turn's first request waits in the server's slot
            asked = await owner.send_text(room, "What time is it?")
            in_turn(rig, room)
            steer = await owner.send_text(room, "And the date too.")
            rig.gatewayd.err.wait_for(f"{steer}: loopd has it")  # type: ignore[union-attr]
            rig.stack.release()
            await answer_of(owner, asked, "Both answered.")
            assert answers_to(owner.events, steer) == []
    records = rig.stack.log(session_for(room))
    assert [r["type"] for r in records if r["type"] in ("user", "break")] == [
        "user",
        "break",
        "user",
    ]
    assert [e["content"]["body"] for e in from_bot(owner.events, room, rig.bot.user_id, "⚙")] == [
        "⚙ clock"
    ]


def in_turn(rig: GatewayRig, room: str) -> None:
    """Until the room's session has its turn's user record (the turn is running)."""
    wait_until(lambda: bool(user_records(rig.stack, session_for(room))), "the turn running")


async def test_new_starts_another_session_and_keeps_the_old(make_rig: MakeRig) -> None:
    rig = make_rig({"replies": [], "default": {"content": "Fresh."}})
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            await answer_of(owner, await owner.send_text(room, "one"), "Fresh.")
            new = await owner.send_text(room, "!new")
            await owner.wait_for(lambda events: bool(answers_to(events, new)))
            assert session_for(room, 2) in answers_to(owner.events, new)[0]["content"]["body"]
            await answer_of(owner, await owner.send_text(room, "two"), "Fresh.")
            listed = await owner.send_text(room, "!sessions")
            await owner.wait_for(lambda events: bool(answers_to(events, listed)))
            body = answers_to(owner.events, listed)[0]["content"]["body"]
    assert f"`{session_for(room)}`" in body
    assert f"`{session_for(room, 2)}` (current)" in body
    assert [r["content"] for r in rig.stack.log(session_for(room)) if r["type"] == "user"] == [
        "one"
    ]
    assert [r["content"] for r in rig.stack.log(session_for(room, 2)) if r["type"] == "user"] == [
        "two"
    ]


async def test_stop_stops_the_running_turn(make_rig: MakeRig) -> None:
    rig = make_rig({"replies": [], "default": {"content": "Never seen."}})
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            rig.stack.hold()
            asked = await owner.send_text(room, "A long job.")
            in_turn(rig, room)
            stop = await owner.send_text(room, "!stop")
            await owner.wait_for(
                lambda events: (
                    len(answers_to(events, asked)) >= 1 and bool(answers_to(events, stop))
                )
            )
            rig.stack.release()
            assert (
                answers_to(owner.events, stop)[0]["content"]["body"]
                == "Stopping the turn that was running."
            )
            assert answers_to(owner.events, asked)[0]["content"]["body"] == "Stopped."
    assert rig.stack.log(session_for(room))[-1]["outcome"] == "stopped"


async def test_a_long_answer_is_split_and_whole(make_rig: MakeRig) -> None:
    rig = make_rig(
        {"replies": [{"content": LONG}], "default": {"content": "?"}},
        fake_args=("--n-ctx", "65536"),
        extra="[baseline]\nmax_tokens = 60000",
    )
    bot = rig.bot.user_id
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            asked = await owner.send_text(room, "Say a lot.")

            def whole(events: list[Any]) -> bool:
                parts = bot_messages(events, room, bot)
                edited = all(edits_of(events, p["event_id"]) for p in parts)
                joined = "".join(latest_text(events, p["event_id"]) or "" for p in parts)
                return edited and joined == LONG  # each part's last edit (always sent) seen

            await owner.wait_for(whole, what="the whole answer")
            parts = bot_messages(owner.events, room, bot)
    assert len(parts) >= 4
    answer = [r for r in rig.stack.log(session_for(room)) if r["type"] == "assistant"]
    assert [r["content"] for r in answer] == [LONG]
    assert answers_to(parts, asked) == parts[:1]  # the first part replies to the message
    finals = [edits_of(owner.events, part["event_id"])[-1] for part in parts]
    assert all("<code>" in e["content"]["m.new_content"]["formatted_body"] for e in finals)


async def test_odd_events_cost_only_themselves_and_an_edit_runs_nothing(make_rig: MakeRig) -> None:
    rig = make_rig({"replies": [], "default": {"content": "Fine."}})
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            first = await owner.send_text(room, "one")
            await answer_of(owner, first, "Fine.")
            await owner.send(room, "com.example.odd", {"body": 5, "nested": {"deep": [1, 2]}})
            image = await owner.send(
                room, "m.room.message", {"msgtype": "m.image", "body": "x.png"}
            )
            edit = await owner.edit(room, first, "one, edited")
            helped = await owner.send_text(room, "!help")
            unknown = await owner.send_text(room, "two", reply_to="$no-such-event")
            await answer_of(owner, unknown, "Fine.")
            await owner.wait_for(lambda e: all(answers_to(e, x) for x in (image, edit, helped)))
            said = {
                x: answers_to(owner.events, x)[0]["content"]["body"] for x in (image, edit, helped)
            }
    assert "reads text messages, files and images" in said[image]
    assert "a file whose address is not an mxc:// URI" in said[image]
    assert "does not run a message again" in said[edit]
    assert "`!new`" in said[helped]
    assert [r["content"] for r in user_records(rig.stack, session_for(room))] == ["one", "two"]
    assert rig.gatewayd is not None
    assert rig.gatewayd.popen.poll() is None
