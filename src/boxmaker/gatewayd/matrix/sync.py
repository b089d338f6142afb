"""A `/sync` answer, as the gateway's port hears it (`port.Heard`), and the bodies of what the
gateway sends. Pure: the client hands in the parsed JSON.

The homeserver's body is hostile as any input: anything of an unexpected shape (a room that
is not an object, an event with no id, a body that is not a string) is left out, never
raised, so one bad event costs that event only (a file's or an image's: `media`). Messages
in a room's timeline come in its order; a room's state (its members, whether it is
encrypted) before its timeline. The gateway's own events are left out: it never answers
itself.
"""

from __future__ import annotations

import re
from typing import Any

from ..port import Batch, Encrypted, Exposed, Heard, Invited, Joined, Reacted, Said, Unreadable
from .media import FILES, sent_of

__all__ = [
    "batch_of",
    "edit_body",
    "gaps_of",
    "message_body",
    "reaction_key",
    "strip_fallback",
    "with_gaps_filled",
]

TEXT = ("m.text", "m.emote")
EDITABLE = (*TEXT, *FILES)  # an edit never runs anything; one of these is told so
CLOSED = ("invite", "private", "knock")  # join rules under which only an invitation lets one in
_FALLBACK = re.compile(r"(?:> [^\n]*\n)+\n")  # a reply's quote of what it answers


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _events(room: dict[str, Any], part: str, key: str = "events") -> list[dict[str, Any]]:
    events = _dict(room.get(part)).get(key)
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def strip_fallback(text: str) -> str:
    """A reply's text without the quote older clients put before it."""
    match = _FALLBACK.match(text)
    return text[match.end() :] if match else text


def _room_state(room: str, kind: str, content: dict[str, Any]) -> Heard | None:
    """What a room's own state says of who can read it."""
    if kind == "m.room.encryption":
        return Encrypted(room)
    rule = content.get("join_rule")
    if kind == "m.room.join_rules" and rule not in CLOSED:
        return Exposed(room, f"anyone may join it (its join rule is {str(rule)[:40]!r})")
    if (
        kind == "m.room.history_visibility"
        and content.get("history_visibility") == "world_readable"
    ):
        return Exposed(room, "anyone may read its history without joining it")
    return None


def _heard(room: str, event: dict[str, Any], me: str) -> Heard | None:
    kind, sender, content = _str(event.get("type")), _str(event.get("sender")), event.get("content")
    if kind is None or sender is None or not isinstance(content, dict):
        return None
    if kind == "m.room.member":
        user = _str(event.get("state_key"))
        membership = content.get("membership")
        if user == me and membership == "invite":
            return Invited(room, sender)
        if user is not None and user != me and membership in ("join", "invite"):
            return Joined(room, user)
        return None
    if event.get("state_key") == "":
        return _room_state(room, kind, content)
    event_id = _str(event.get("event_id"))
    if sender == me or event_id is None or "state_key" in event:
        return None
    relates = _dict(content.get("m.relates_to"))
    if kind == "m.reaction":
        target, key = _str(relates.get("event_id")), _str(relates.get("key"))
        if relates.get("rel_type") != "m.annotation" or target is None or key is None:
            return Unreadable(room, sender, event_id, "a reaction of an unknown shape")
        return Reacted(room, sender, event_id, target, key)
    if kind == "m.room.encrypted":
        return Unreadable(room, sender, event_id, "an encrypted message")
    if kind != "m.room.message":
        return None  # typing, receipts, calls, stickers' kin: nothing to answer
    at = event.get("origin_server_ts")
    at = at if isinstance(at, int) and not isinstance(at, bool) and at > 0 else 0
    if relates.get("rel_type") == "m.replace":  # of a text, or of a file's caption
        new = _dict(content.get("m.new_content"))
        target, body = _str(relates.get("event_id")), new.get("body")
        if target is None or not isinstance(body, str) or new.get("msgtype") not in EDITABLE:
            return Unreadable(room, sender, event_id, "an edit of an unknown shape")
        return Said(room, sender, event_id, body, edits=target, at=at)
    body, msgtype = content.get("body"), content.get("msgtype")
    if msgtype in FILES:
        return sent_of(room, sender, event_id, content, at)
    if msgtype not in TEXT or not isinstance(body, str):
        what = f"a message of type {msgtype}" if isinstance(msgtype, str) else "a message"
        return Unreadable(room, sender, event_id, what[:80])
    reply_to = _str(_dict(relates.get("m.in_reply_to")).get("event_id"))
    text = strip_fallback(body) if reply_to is not None else body
    return Said(room, sender, event_id, text, reply_to=reply_to, at=at)


def gaps_of(body: Any) -> dict[str, str]:
    """The joined rooms whose timeline in a `/sync` answer left events out (`limited`), each
    with the token to page back from (`prev_batch`)."""
    gaps = {}
    for room, joined in _dict(_dict(_dict(body).get("rooms")).get("join")).items():
        timeline = _dict(_dict(joined).get("timeline"))
        if timeline.get("limited") is True and isinstance(token := timeline.get("prev_batch"), str):
            gaps[room] = token
    return gaps


def with_gaps_filled(body: dict[str, Any], filled: dict[str, list[Any]]) -> None:
    """Put the events fetched for each gap (in order) before the room's timeline, and mark the
    room's timeline whole."""
    joined = _dict(_dict(body.get("rooms")).get("join"))
    for room, events in filled.items():
        timeline = _dict(_dict(joined.get(room)).get("timeline"))
        if timeline:
            timeline["events"] = [*events, *_events({"timeline": timeline}, "timeline")]
            timeline["limited"] = False


def batch_of(body: Any, me: str, first: bool = False) -> Batch | None:
    """What a `/sync` answer says, or None when it is not one (no `next_batch`)."""
    answer = _dict(body)
    position = _str(answer.get("next_batch"))
    if position is None:
        return None
    rooms = _dict(answer.get("rooms"))
    heard: list[Heard] = []
    gaps: list[str] = []
    for room, joined in _dict(rooms.get("join")).items():
        if not isinstance(joined, dict):
            continue
        if _dict(joined.get("timeline")).get("limited") is True:
            gaps.append(room)
        for event in [*_events(joined, "state"), *_events(joined, "timeline")]:
            if (said := _heard(room, event, me)) is not None:
                heard.append(said)
    for room, invited in _dict(rooms.get("invite")).items():
        if isinstance(invited, dict):  # stripped state is unsigned: the invitation is the last
            mine = [e for e in _events(invited, "invite_state") if e.get("state_key") == me]
            if mine and isinstance(said := _heard(room, mine[-1], me), Invited):
                heard.append(said)
    return Batch(tuple(heard), position, first, tuple(gaps))


def message_body(text: str, html: str | None, *, notice: bool, reply_to: str | None) -> dict:  # type: ignore[type-arg]
    content: dict[str, Any] = {"msgtype": "m.notice" if notice else "m.text", "body": text}
    if html is not None:
        content |= {"format": "org.matrix.custom.html", "formatted_body": html}
    if reply_to is not None:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


def edit_body(target: str, text: str, html: str | None) -> dict[str, Any]:
    """An `m.replace` of `target`: clients show `m.new_content`; `body` is for the others."""
    new = message_body(text, html, notice=False, reply_to=None)
    content: dict[str, Any] = {"msgtype": "m.text", "body": f"* {text}"}
    if html is not None:
        content |= {"format": "org.matrix.custom.html", "formatted_body": f"* {html}"}
    return content | {
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": target},
    }


def reaction_key(key: str) -> str:
    """A reaction's key as people mean it: emoji variation selectors and skin tones dropped."""
    return "".join(
        ch for ch in key if not ("\ufe00" <= ch <= "\ufe0f" or "\U0001f3fb" <= ch <= "\U0001f3ff")
    )
