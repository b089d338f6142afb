"""Attacks on gatewayd against the real homeserver (a hostile review of issue 44), kept as
tests: a stranger's deeply nested event (an invitation's state, a to-device message) costs
only itself; a room anyone may join or whose history anyone may read is left before anything
is said there; an answer to a question given while gatewayd was down is taken; a message a
terminal's turn took is answered once."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import pytest
import trio

from boxmaker import proto as p
from boxmaker.channel import encode_frame
from boxmaker.gatewayd.state import session_for

from ..e2e.test_broker import ASK_WRITES
from ..processes import wait_until
from .conftest import Account, MakeRig
from .rig import (
    answer_of,
    answers_to,
    from_bot,
    latest_text,
    membership,
    pending_count,
    user_records,
)  # fmt: skip

SCRIPT = {"replies": [], "default": {"content": "Yes, owner."}}


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def deep_invitation(bot: str) -> tuple[str, str, dict[str, Any]]:
    """A room the stranger makes, inviting the bot, its create event nested 120 deep."""
    body = {"invite": [bot], "preset": "private_chat", "creation_content": {"x": nested(120)}}
    return "POST", "v3/createRoom", body


def deep_to_device(bot: str) -> tuple[str, str, dict[str, Any]]:
    """No room at all: a to-device message to every device of the bot (no sync filter leaves
    out `to_device`), nested 120 deep."""
    return (
        "PUT",
        "v3/sendToDevice/m.boxmaker.attack/t1",
        {"messages": {bot: {"*": {"x": nested(120)}}}},
    )


@pytest.mark.parametrize("attack", [deep_invitation, deep_to_device])
async def test_a_stranger_s_deeply_nested_event_costs_only_itself(
    make_rig: MakeRig, stranger: Account, attack: Callable[[str], tuple[str, str, dict[str, Any]]]
) -> None:
    """Synapse takes a value nested 120 deep, past the project's own reader (100): the /sync
    that brings it is read, and the owner is answered after it."""
    rig = make_rig()
    with trio.fail_after(90):
        async with await rig.client() as owner, await rig.client(stranger) as other:
            room = await rig.direct_room(owner)
            first = await owner.send_text(room, "before")
            await answer_of(owner, first, "Yes, owner.")
            method, path, body = attack(rig.bot.user_id)
            await other.request(method, path, json=body)
            asked = await owner.send_text(room, "after the stranger's event")
            await answer_of(owner, asked, "Yes, owner.", timeout=30)


@pytest.mark.parametrize(
    ("kind", "content", "said"),
    [
        ("m.room.history_visibility", {"history_visibility": "world_readable"}, "read its history"),
        ("m.room.join_rules", {"join_rule": "public"}, "anyone may join it"),
    ],
)
async def test_a_room_open_to_others_is_left_before_anything_is_said_there(
    make_rig: MakeRig, stranger: Account, kind: str, content: dict[str, Any], said: str
) -> None:
    """A stranger reads a world-readable room's history without joining, and a public room's
    by joining it: the bot leaves such a room, saying why, before the owner's message there
    runs (and its answer would be read)."""
    rig = make_rig()
    bot = rig.bot.user_id
    with trio.fail_after(60):
        async with await rig.client() as owner, await rig.client(stranger) as other:
            room = await owner.create_room(invite=[bot], is_direct=False)
            await owner.wait_for(lambda events: membership(events, room, bot) == "join")
            await owner.request("PUT", f"v3/rooms/{room}/state/{kind}/", json=content)
            await owner.wait_for(lambda events: membership(events, room, bot) == "leave")
            await owner.send_text(room, "My bank PIN is 4321; remember it.")
            history = [e | {"room_id": room} for e in await owner.messages(room)]
            (told,) = from_bot(history, room, bot, "")
            assert said in told["content"]["body"]
            if kind == "m.room.history_visibility":
                bodies = [e["content"].get("body") for e in await other.messages(room)]
                assert "My bank PIN is 4321; remember it." in bodies  # what the bot left for
    assert user_records(rig.stack, session_for(room)) == []


def write(name: str, text: str) -> dict[str, Any]:
    return {"tool_calls": [["write_file", json.dumps({"path": name, "content": text})]]}


ASKS = "The agent asks to run"


async def test_an_answer_given_while_gatewayd_was_down_is_taken(make_rig: MakeRig) -> None:
    """A reply to a question, sent while gatewayd is down, is read by the first /sync after
    its restart, whether or not the watch has posted the questions again (they are kept)."""
    script = {"replies": [write("one.txt", "first\n"), {"content": "Done."}],
              "default": {"content": "More?"}}  # fmt: skip
    rig = make_rig(script, policy=ASK_WRITES)
    bot = rig.bot.user_id
    with trio.fail_after(90):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            asked = await owner.send_text(room, "Write a file.")
            await owner.wait_for(lambda events: bool(from_bot(events, room, bot, ASKS)))
            first = from_bot(owner.events, room, bot, ASKS)[0]
            rig.kill_gatewayd()
            reply = await owner.send_text(room, "s", reply_to=first["event_id"])
            rig.start_gatewayd()
            await owner.wait_for(lambda events: bool(answers_to(events, reply)), 30)
            assert answers_to(owner.events, reply)[0]["content"]["body"] == "Answered: session."
            await answer_of(owner, asked, "Done.")
    assert [r["content"] for r in user_records(rig.stack, session_for(room))] == ["Write a file."]


async def test_a_message_a_terminal_s_turn_took_is_answered_once(make_rig: MakeRig) -> None:
    """The owner writes while a turn another channel started (a terminal: no origin) runs in
    the room's session, and loopd takes the message into that turn as a soft break: that
    turn's answer answers it, and nothing is posted again when the watch is opened anew."""
    clock = {"tool_calls": [["clock", json.dumps({})]]}
    script = {"replies": [{"content": "Yes, owner."}, clock, {"content": "Both answered."}],
              "default": {"content": "Yes, owner."}}  # fmt: skip
    rig = make_rig(script)
    bot = rig.bot.user_id
    with trio.fail_after(120):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            await answer_of(owner, await owner.send_text(room, "hello"), "Yes, owner.")
            rig.stack.hold()
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as terminal:
                terminal.connect(str(rig.stack.socket))
                terminal.sendall(encode_frame(p.TurnFrame(
                    p.SessionId(session_for(room)), "From the terminal.", resume=True,
                    detach=True,
                )))  # fmt: skip
            wait_until(lambda: len(user_records(rig.stack, session_for(room))) == 2, "its turn")
            steer = await owner.send_text(room, "And this, from the phone.")
            rig.gatewayd.err.wait_for(f"{steer}: loopd has it")  # type: ignore[union-attr]
            rig.stack.release()
            await owner.wait_for(
                lambda events: any(
                    latest_text(events, e["event_id"]) == "Both answered."
                    for e in from_bot(events, room, bot, "Both")
                ),
                what="the turn's answer",
            )
            wait_until(lambda: pending_count(rig) == 0, "the message answered")
            second = await rig.direct_room(owner)  # the watch is opened anew, with its session
            await answer_of(owner, await owner.send_text(second, "hi"), "Yes, owner.")
            history = [e | {"room_id": room} for e in await owner.messages(room)]
    assert len(from_bot(history, room, bot, "Both")) == 1
    assert answers_to(history, steer) == []  # the terminal's turn answered it, unreplied
    assert [r["content"] for r in user_records(rig.stack, session_for(room))] == [
        "hello", "From the terminal.", "And this, from the phone."
    ]  # fmt: skip
