"""The harness itself, against the real homeserver: two people talk in a DM (messages, a reply,
a reaction, edits), and the homeserver keeps it all across a restart and a kill."""

from __future__ import annotations

from collections.abc import Callable

import trio
from bxdev.matrix_client import Event, MatrixClient
from bxdev.synapse import Synapse

from .conftest import Account

WAIT_S = 30.0
RESTARTS_S = 60.0


def has(*event_ids: str) -> Callable[[list[Event]], bool]:
    """Whether all these events have been seen."""
    return lambda events: set(event_ids) <= {event.get("event_id") for event in events}


def membership(user_id: str, room: str, state: str) -> Callable[[list[Event]], bool]:
    """Whether `user_id`'s membership of `room` has become `state` (invite, join...)."""
    return lambda events: any(
        event["type"] == "m.room.member"
        and event["room_id"] == room
        and event.get("state_key") == user_id
        and event["content"].get("membership") == state
        for event in events
    )


def client(synapse: Synapse, account: Account) -> MatrixClient:
    return MatrixClient(synapse.url, account.token, account.user_id)


async def test_two_people_talk_in_a_dm(synapse: Synapse, owner: Account, stranger: Account) -> None:
    with trio.fail_after(WAIT_S):
        async with (
            client(synapse, owner) as alice,
            await MatrixClient.login(synapse.url, stranger.user_id, stranger.password) as bob,
        ):
            room = await alice.create_room(invite=[bob.user_id])
            invites = await bob.wait_for(membership(bob.user_id, room, "invite"), what="invite")
            invite = next(e for e in invites if e.get("state_key") == bob.user_id)
            assert invite["content"].get("is_direct") is True
            await bob.join(room)
            await alice.wait_for(membership(bob.user_id, room, "join"), what="bob's join")
            assert await alice.joined_members(room) == {alice.user_id, bob.user_id}

            first = await alice.send_text(room, "hello")
            reply = await alice.send_text(room, "a reply", reply_to=first)
            reaction = await alice.react(room, first, "👍")
            edit = await alice.edit(room, first, "hello, edited")
            foreign = await bob.edit(room, first, "not bob's to edit")

            await bob.wait_for(has(first, reply, reaction, edit, foreign), what="alice's events")
            seen = {event["event_id"]: event for event in bob.events if "event_id" in event}
            assert seen[first]["content"] == {"msgtype": "m.text", "body": "hello"}
            in_reply_to = seen[reply]["content"]["m.relates_to"]["m.in_reply_to"]
            assert in_reply_to == {"event_id": first}
            assert seen[reaction]["type"] == "m.reaction"
            annotation = {"rel_type": "m.annotation", "event_id": first, "key": "👍"}
            assert seen[reaction]["content"]["m.relates_to"] == annotation
            assert seen[edit]["content"]["m.new_content"]["body"] == "hello, edited"

            assert await bob.latest_text_of(room, first) == "hello, edited"
            assert await alice.latest_text_of(room, reply) == "a reply"
            bodies = [event["content"]["body"] for event in await bob.messages(room)]
            assert bodies == ["hello", "a reply", "* hello, edited", "* not bob's to edit"]


async def test_an_encrypted_room_says_so(synapse: Synapse, owner: Account) -> None:
    with trio.fail_after(WAIT_S):
        async with client(synapse, owner) as alice:
            room = await alice.create_room(encrypted=True, is_direct=False, name="secret")
            encryption = await alice.state(room, "m.room.encryption")
            assert encryption == {"algorithm": "m.megolm.v1.aes-sha2"}
            assert await alice.state(room, "m.room.name") == {"name": "secret"}


async def test_restart_and_kill_keep_rooms_and_messages(
    synapse: Synapse, owner: Account, stranger: Account
) -> None:
    with trio.fail_after(RESTARTS_S):
        async with client(synapse, owner) as alice:
            room = await alice.create_room(invite=[stranger.user_id])
            before = await alice.send_text(room, "before the restart")
            await alice.wait_for(has(before))

            await trio.to_thread.run_sync(synapse.restart)
            after = await alice.send_text(room, "after the restart")
            await alice.wait_for(has(after), what="a message after the restart")

            await trio.to_thread.run_sync(synapse.kill)
            await trio.to_thread.run_sync(synapse.start)
            bodies = [event["content"]["body"] for event in await alice.messages(room)]
            assert bodies == ["before the restart", "after the restart"]

        async with client(synapse, stranger) as bob:
            await bob.join(room)
            assert await bob.joined_members(room) == {owner.user_id, stranger.user_id}
            await bob.wait_for(has(before, after), what="the messages from before the kill")
