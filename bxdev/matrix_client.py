"""A small Matrix client-server API client for the gateway tier and its bench row: the tests act
through it as the owner and as strangers, against the real homeserver (`bxdev.synapse`).

Events are the server's JSON objects. `wait_for` long-polls `/sync` and keeps every event it has
seen (each with its `room_id`), so a test waits for what it needs to see, never for time.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
import trio

__all__ = ["Event", "MatrixClient", "MatrixError", "edits_of", "replies_to"]

Event = dict[str, Any]

HTTP_TIMEOUT_S = 10.0
POLL_MS = 5_000
SYNC_FILTER = json.dumps({"room": {"timeline": {"limit": 100}}, "presence": {"types": []}})
MEGOLM = {"algorithm": "m.megolm.v1.aes-sha2"}
ENCRYPTION = {"type": "m.room.encryption", "state_key": "", "content": MEGOLM}


class MatrixError(Exception):
    """The homeserver refused a request: its status, `errcode` and error text."""

    def __init__(self, what: str, status: int, errcode: str, error: str) -> None:
        super().__init__(f"{what}: {status} {errcode} {error}")
        self.status = status
        self.errcode = errcode


def _q(part: str) -> str:
    return quote(part, safe="")


class MatrixClient:
    """One user's session on the homeserver at `base_url`; use it as an async context manager
    (or `aclose` it)."""

    def __init__(self, base_url: str, access_token: str, user_id: str) -> None:
        self.base_url = base_url
        self.user_id = user_id
        self.events: list[Event] = []
        self._since: str | None = None
        self._txns = itertools.count()
        self._txn_prefix = uuid.uuid4().hex[:8]
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=HTTP_TIMEOUT_S,
        )

    @classmethod
    async def login(cls, base_url: str, user: str, password: str) -> MatrixClient:
        """A new session (a new device) from a password login."""
        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": user},
            "password": password,
        }
        async with httpx.AsyncClient(base_url=base_url, timeout=HTTP_TIMEOUT_S) as http:
            response = await http.post("/_matrix/client/v3/login", json=body)
        answer = _answer(f"login as {user}", response)
        return cls(base_url, answer["access_token"], answer["user_id"])

    async def __aenter__(self) -> MatrixClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float = HTTP_TIMEOUT_S,
    ) -> dict[str, Any]:
        """One client-server API call (`path` under `/_matrix/client/`): its JSON answer."""
        response = await self._http.request(
            method, f"/_matrix/client/{path}", json=json, params=params, timeout=timeout
        )
        return _answer(f"{self.user_id} {method} {path}", response)

    def _txn(self, txn: str | None) -> str:
        return _q(txn or f"{self._txn_prefix}-{next(self._txns)}")

    async def create_room(
        self,
        invite: Sequence[str] = (),
        *,
        is_direct: bool = True,
        encrypted: bool = False,
        name: str | None = None,
    ) -> str:
        """A new private room (a DM, as Element makes one, when `is_direct`): its ID."""
        body: dict[str, Any] = {
            "invite": list(invite),
            "is_direct": is_direct,
            "preset": "trusted_private_chat" if is_direct else "private_chat",
            "initial_state": [ENCRYPTION] if encrypted else [],
        }
        if name is not None:
            body["name"] = name
        answer = await self.request("POST", "v3/createRoom", json=body)
        room_id: str = answer["room_id"]
        return room_id

    async def invite(self, room: str, user_id: str) -> None:
        await self.request("POST", f"v3/rooms/{_q(room)}/invite", json={"user_id": user_id})

    async def join(self, room: str) -> None:
        await self.request("POST", f"v3/join/{_q(room)}", json={})

    async def leave(self, room: str) -> None:
        await self.request("POST", f"v3/rooms/{_q(room)}/leave", json={})

    async def send(
        self, room: str, event_type: str, content: dict[str, Any], txn: str | None = None
    ) -> str:
        """Send a room event: its event ID."""
        path = f"v3/rooms/{_q(room)}/send/{_q(event_type)}/{self._txn(txn)}"
        answer = await self.request("PUT", path, json=content)
        event_id: str = answer["event_id"]
        return event_id

    async def send_text(
        self, room: str, body: str, reply_to: str | None = None, txn: str | None = None
    ) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if reply_to is not None:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return await self.send(room, "m.room.message", content, txn)

    async def upload(self, data: bytes, content_type: str, filename: str) -> str:
        """Upload a file to the homeserver's media repository: its `mxc://` URI."""
        response = await self._http.post(
            "/_matrix/media/v3/upload", params={"filename": filename}, content=data,
            headers={"Content-Type": content_type},
        )  # fmt: skip
        uri: str = _answer(f"{self.user_id} upload {filename}", response)["content_uri"]
        return uri

    async def send_file(
        self, room: str, url: str, body: str, *, msgtype: str = "m.file",
        filename: str | None = None, info: dict[str, Any] | None = None,
    ) -> str:  # fmt: skip
        """Send an `m.file` or `m.image` of the uploaded `url`: with `filename` other than
        `body`, `body` is its caption (Matrix 1.10)."""
        content: dict[str, Any] = {"msgtype": msgtype, "body": body, "url": url}
        if filename is not None:
            content["filename"] = filename
        if info is not None:
            content["info"] = info
        return await self.send(room, "m.room.message", content)

    async def edit(self, room: str, event_id: str, new_body: str, txn: str | None = None) -> str:
        content = {
            "msgtype": "m.text",
            "body": f"* {new_body}",
            "m.new_content": {"msgtype": "m.text", "body": new_body},
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        }
        return await self.send(room, "m.room.message", content, txn)

    async def react(self, room: str, event_id: str, key: str, txn: str | None = None) -> str:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return await self.send(room, "m.reaction", content, txn)

    async def event(self, room: str, event_id: str) -> Event:
        return await self.request("GET", f"v3/rooms/{_q(room)}/event/{_q(event_id)}")

    async def state(self, room: str, event_type: str, state_key: str = "") -> dict[str, Any]:
        """The content of one state event of the room."""
        path = f"v3/rooms/{_q(room)}/state/{_q(event_type)}/{_q(state_key)}"
        return await self.request("GET", path)

    async def messages(
        self, room: str, limit: int = 1000, types: tuple[str, ...] = ("m.room.message",)
    ) -> list[Event]:
        """The room's last `limit` events of `types` (messages, edits too), oldest first."""
        found: list[Event] = []
        params: dict[str, Any] = {"dir": "b", "limit": 100}
        while len(found) < limit:
            page = await self.request("GET", f"v3/rooms/{_q(room)}/messages", params=params)
            found += [e for e in page["chunk"] if e["type"] in types]
            if "end" not in page or not page["chunk"]:
                break
            params["from"] = page["end"]
        return found[:limit][::-1]

    async def latest_text_of(self, room: str, event_id: str) -> str:
        """The event's text after its newest edit by its own sender (others' edits do not
        count, as in every client)."""
        original = await self.event(room, event_id)
        path = f"v1/rooms/{_q(room)}/relations/{_q(event_id)}/m.replace"
        params: dict[str, Any] = {"dir": "b", "limit": 50}
        while True:
            page = await self.request("GET", path, params=params)
            for edit in page["chunk"]:  # newest first
                new = edit["content"].get("m.new_content")
                if edit["sender"] == original["sender"] and isinstance(new, dict):
                    body: str = new["body"]
                    return body
            if "next_batch" not in page:
                text: str = original["content"]["body"]
                return text
            params["from"] = page["next_batch"]

    async def joined_members(self, room: str) -> set[str]:
        answer = await self.request("GET", f"v3/rooms/{_q(room)}/joined_members")
        return set(answer["joined"])

    async def sync(self, timeout_ms: int = 0) -> list[Event]:
        """One `/sync` from where the last left off: the new events, also kept in `events`.
        Timeline events of joined and left rooms, and the stripped state of invites (an invite
        to this user is an `m.room.member` event with membership `invite`)."""
        params: dict[str, Any] = {"timeout": timeout_ms, "filter": SYNC_FILTER}
        if self._since is not None:
            params["since"] = self._since
        answer = await self.request(
            "GET", "v3/sync", params=params, timeout=timeout_ms / 1000 + HTTP_TIMEOUT_S
        )
        self._since = answer["next_batch"]
        rooms = answer.get("rooms", {})
        new: list[Event] = []
        for kind, key in (("join", "timeline"), ("leave", "timeline"), ("invite", "invite_state")):
            for room_id, room in rooms.get(kind, {}).items():
                events = room.get(key, {}).get("events", [])
                new += [event | {"room_id": room_id} for event in events]
        self.events += new
        return new

    async def wait_for(
        self, predicate: Callable[[list[Event]], bool], timeout: float = 30.0, what: str = ""
    ) -> list[Event]:
        """Long-poll `/sync` until `predicate(self.events)` holds: the events; raises
        `TimeoutError` after `timeout` seconds, saying what it waited for and saw."""
        with trio.move_on_after(timeout):
            while not predicate(self.events):
                await self.sync(POLL_MS)
            return self.events
        seen = "\n".join(_brief(event) for event in self.events[-30:])
        raise TimeoutError(
            f"{self.user_id} did not see {what or 'what it waited for'} within {timeout:g} s; "
            f"the last events it saw:\n{seen}"
        )

    async def wait_for_event(self, event_id: str, timeout: float = 30.0) -> Event:
        """The event with this ID, once `/sync` has brought it."""

        def by_id(events: list[Event]) -> bool:
            return any(event.get("event_id") == event_id for event in events)

        events = await self.wait_for(by_id, timeout, f"event {event_id}")
        return next(event for event in events if event.get("event_id") == event_id)


def _answer(what: str, response: httpx.Response) -> dict[str, Any]:
    try:
        answer = response.json()
    except ValueError:
        answer = {}
    if response.status_code != 200:
        errcode = answer.get("errcode", "") if isinstance(answer, dict) else ""
        error = answer.get("error", response.text) if isinstance(answer, dict) else response.text
        raise MatrixError(what, response.status_code, errcode, error)
    result: dict[str, Any] = answer
    return result


def _brief(event: Event) -> str:
    content = event.get("content", {})
    text = content.get("body", content.get("membership", ""))
    return f"  {event.get('room_id')} {event.get('sender')} {event.get('type')} {text!r}"


def replies_to(events: list[Event], event_id: str) -> list[Event]:
    """The messages among `events` that reply to `event_id`."""
    return [
        e for e in events
        if e.get("content", {}).get("m.relates_to", {}).get("m.in_reply_to", {}).get("event_id")
        == event_id
    ]  # fmt: skip


def edits_of(events: list[Event], event_id: str) -> list[Event]:
    """The edits (`m.replace`) of `event_id` among `events`, in their order."""
    return [
        e for e in events
        if e.get("content", {}).get("m.relates_to", {}).get("rel_type") == "m.replace"
        and e["content"]["m.relates_to"].get("event_id") == event_id
    ]  # fmt: skip
