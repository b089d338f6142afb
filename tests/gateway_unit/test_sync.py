"""What a `/sync` answer says (`gatewayd.matrix.sync`): hostile shapes cost only themselves."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.gatewayd.matrix import batch_of, edit_body, message_body, strip_fallback
from boxmaker.gatewayd.port import Encrypted, Invited, Joined, Reacted, Said, Unreadable

ME = "@bot:hs"
REPLY = {"m.in_reply_to": {"event_id": "$q"}}
LIKE = {"rel_type": "m.annotation", "event_id": "$q", "key": "👍"}
EDIT = {"rel_type": "m.replace", "event_id": "$1"}


def sync(join: dict[str, Any] | None = None, invite: dict[str, Any] | None = None) -> Any:
    return {"next_batch": "s2", "rooms": {"join": join or {}, "invite": invite or {}}}


def message(event_id: str, body: Any, sender: str = "@o:hs", **content: Any) -> dict[str, Any]:
    return {
        "type": "m.room.message", "sender": sender, "event_id": event_id,
        "content": {"msgtype": "m.text", "body": body, **content},
    }  # fmt: skip


def test_a_room_s_state_then_its_timeline_in_order() -> None:
    room = {
        "state": {"events": [
            {"type": "m.room.member", "sender": "@o:hs", "state_key": "@eve:hs",
             "content": {"membership": "join"}},
            {"type": "m.room.encryption", "sender": "@o:hs", "state_key": "", "content": {}},
        ]},
        "timeline": {"events": [
            message("$1", "one"),
            message("$2", "mine", sender=ME),
            message("$3", "> <@bot:hs> asked\n\nyes", **{"m.relates_to": REPLY}),
            {"type": "m.reaction", "sender": "@o:hs", "event_id": "$4",
             "content": {"m.relates_to": LIKE}},
            message("$5", "* new", **{"m.new_content": {"msgtype": "m.text", "body": "new"},
                                       "m.relates_to": EDIT}),
            {"type": "m.room.message", "sender": "@o:hs", "event_id": "$6",
             "content": {"msgtype": "m.image", "body": "cat.png"}},
        ]},
    }  # fmt: skip
    batch = batch_of(sync({"!r": room}), ME)
    assert batch is not None
    assert batch.position == "s2"
    assert batch.heard == (
        Joined("!r", "@eve:hs"),
        Encrypted("!r"),
        Said("!r", "@o:hs", "$1", "one"),
        Said("!r", "@o:hs", "$3", "yes", reply_to="$q"),
        Reacted("!r", "@o:hs", "$4", "$q", "👍"),
        Said("!r", "@o:hs", "$5", "new", edits="$1"),
        Unreadable("!r", "@o:hs", "$6", "a file whose address is not an mxc:// URI"),
    )


def test_an_invitation_names_its_sender() -> None:
    invited = {"invite_state": {"events": [
        {"type": "m.room.member", "sender": "@o:hs", "state_key": ME,
         "content": {"membership": "invite"}},
    ]}}  # fmt: skip
    batch = batch_of(sync(invite={"!r": invited}), ME)
    assert batch is not None
    assert batch.heard == (Invited("!r", "@o:hs"),)


def test_no_next_batch_is_no_sync() -> None:
    assert batch_of({"rooms": {}}, ME) is None
    assert batch_of([], ME) is None
    assert batch_of({"next_batch": 5}, ME) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=6), JSON, max_size=3), JSON, JSON)
def test_any_shape_is_read_without_raising(rooms: Any, timeline: Any, event: Any) -> None:
    body = sync({"!r": {"timeline": {"events": [event, timeline]}, "state": timeline}, **rooms})
    batch = batch_of(body, ME)
    assert batch is not None
    body = {
        "next_batch": "x",
        "rooms": {"join": rooms, "invite": {"!i": {"invite_state": timeline}}},
    }
    assert batch_of(body, ME) is not None


def test_bodies_the_gateway_sends() -> None:
    assert message_body("hi", None, notice=True, reply_to="$1") == {
        "msgtype": "m.notice", "body": "hi", "m.relates_to": {"m.in_reply_to": {"event_id": "$1"}}
    }  # fmt: skip
    edit = edit_body("$1", "new", "<b>new</b>")
    assert edit["m.new_content"] == {
        "msgtype": "m.text", "body": "new", "format": "org.matrix.custom.html",
        "formatted_body": "<b>new</b>",
    }  # fmt: skip
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$1"}
    assert strip_fallback("> <@a:hs> q\n> more\n\nanswer") == "answer"
    assert strip_fallback("> a quote of my own") == "> a quote of my own"


def test_a_room_whose_events_did_not_all_come_is_named() -> None:
    body = sync({"!a": {"timeline": {"events": [], "limited": True}}, "!b": {"timeline": {}}})
    batch = batch_of(body, ME)
    assert batch is not None
    assert batch.gaps == ("!a",)
