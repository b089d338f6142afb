"""Approvals from the phone (issue 44, parts 6 and 8), against the real homeserver: a question
is posted with the call's detail, answered by the owner's reply or reaction; a stranger's
reply changes nothing; a question still waiting when gatewayd is killed is found again and
answered as before."""

from __future__ import annotations

import json
from typing import Any

import trio
from bxdev.matrix_client import Event, MatrixClient

from ..e2e.test_broker import ASK_WRITES
from .conftest import Account, MakeRig
from .rig import answer_of, answers_to, from_bot, membership


def write(name: str, text: str) -> dict[str, Any]:
    return {"tool_calls": [["write_file", json.dumps({"path": name, "content": text})]]}


POLICY = ASK_WRITES
SCRIPT = {
    "replies": [write("one.txt", "first\n"), write("two.txt", "second\n"), {"content": "Done."}],
    "default": {"content": "More?"},
}
ASKS = "The agent asks to run"


async def question(client: MatrixClient, room: str, bot: str, n: int) -> Event:
    """The `n`th question the bot asked in `room` (1 is the first)."""
    await client.wait_for(
        lambda events: len(from_bot(events, room, bot, ASKS)) >= n, what=f"question {n}"
    )
    return from_bot(client.events, room, bot, ASKS)[n - 1]


async def said_to(client: MatrixClient, event_id: str) -> str:
    await client.wait_for(lambda events: bool(answers_to(events, event_id)), what="a reply")
    return str(answers_to(client.events, event_id)[0]["content"]["body"])


async def test_answered_by_a_reply_and_by_a_reaction_not_by_a_stranger(
    make_rig: MakeRig, stranger: Account
) -> None:
    rig = make_rig(matrix="allow_shared_rooms = true")
    bot = rig.bot.user_id
    with trio.fail_after(90):
        async with await rig.client() as owner, await rig.client(stranger) as other:
            room = await owner.create_room(invite=[stranger.user_id, bot], is_direct=False)
            await other.join(room)
            await owner.wait_for(lambda events: membership(events, room, bot) == "join")
            asked = await owner.send_text(room, "Write two files.")
            first = await question(owner, room, bot, 1)
            body = first["content"]["body"]
            assert "write_file" in body
            assert "one.txt" in body
            assert "first" in body
            await other.send_text(room, "y", reply_to=first["event_id"])  # changes nothing
            await other.react(room, first["event_id"], "👍")
            reply = await owner.send_text(room, "y", reply_to=first["event_id"])
            assert await said_to(owner, reply) == "Answered: once."
            second = await question(owner, room, bot, 2)
            await owner.react(room, second["event_id"], "👍")
            await answer_of(owner, asked, "Done.")
            lines = [e["content"]["body"] for e in from_bot(owner.events, room, bot, "⚙")]
    assert lines == ["⚙ write_file — one.txt", "⚙ write_file — two.txt"]  # each call, in short
    assert (rig.stack.workspace / "one.txt").read_text() == "first\n"
    assert (rig.stack.workspace / "two.txt").read_text() == "second\n"


async def test_a_denial_by_reaction_and_unclear_words(make_rig: MakeRig) -> None:
    rig = make_rig()
    bot = rig.bot.user_id
    with trio.fail_after(90):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            asked = await owner.send_text(room, "Write two files.")
            first = await question(owner, room, bot, 1)
            unclear = await owner.send_text(room, "maybe later", reply_to=first["event_id"])
            assert "Answer with" in await said_to(owner, unclear)
            await owner.react(room, first["event_id"], "❌")
            second = await question(owner, room, bot, 2)
            await owner.send_text(room, "n", reply_to=second["event_id"])
            await answer_of(owner, asked, "Done.")
    assert not (rig.stack.workspace / "one.txt").exists()
    assert not (rig.stack.workspace / "two.txt").exists()


async def test_a_question_waits_across_a_gatewayd_kill(make_rig: MakeRig) -> None:
    rig = make_rig()
    bot = rig.bot.user_id
    with trio.fail_after(90):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            asked = await owner.send_text(room, "Write two files.")
            first = await question(owner, room, bot, 1)
            rig.kill_gatewayd()
            rig.start_gatewayd()
            rig.gatewayd.err.wait_for("posted again")  # type: ignore[union-attr]
            reply = await owner.send_text(room, "s", reply_to=first["event_id"])
            assert await said_to(owner, reply) == "Answered: session."
            await answer_of(owner, asked, "Done.")  # `session`: the second call asks nobody
            assert len(from_bot(owner.events, room, bot, ASKS)) == 1
    assert (rig.stack.workspace / "two.txt").read_text() == "second\n"
