"""The Matrix client-server API on trio, over httpx (docs/decisions.md, "The gateway's Matrix
client"): the few calls the gateway makes, typed, with every answer bounded. It implements the
gateway's `port.Network`.

A homeserver's answer holds what anyone on the network wrote (an invitation's state, a
to-device message), nested as deep as the homeserver's own parser let through: it is read by
orjson (1,024 levels), not by the project's strict reader (100 levels, for its own files and
frames), so no stranger's event can make a whole `/sync` unreadable.

Failures are one of two kinds. `Unreachable`: the homeserver could not be asked or answered
5xx or 429 (`retry_after` when it said how long to wait): the call may be made again, and
every call here may (a post's transaction id is its key, so the homeserver posts it once).
`Refused`: it answered 4xx: asking again gives the same answer. A file's download is bounded
twice: in bytes (`FileTooLarge`, a `Refused`, before more than the most is read) and in time
(`DOWNLOAD_S`, whole).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import trio

from ..port import Batch
from .media import download_paths
from .sync import batch_of, edit_body, gaps_of, message_body, with_gaps_filled

__all__ = ["DOWNLOAD_S", "MAX_BODY", "FileTooLarge", "Matrix", "Refused", "Unreachable"]

log = logging.getLogger("gatewayd")

MAX_BODY = 32 * 1024 * 1024  # of one answer: a /sync after a long absence is the largest
_API = "/_matrix/client/v3"
# Enough of each room's timeline that a burst between two syncs is whole as a rule (a gap is
# paged back); presence, receipts and account data are not read.
SYNC_FILTER = (
    '{"room":{"timeline":{"limit":1000},"ephemeral":{"types":[]},"account_data":{"types":[]}},'
    '"presence":{"types":[]},"account_data":{"types":[]}}'
)
SMALL_FILTER = SYNC_FILTER.replace('"limit":1000', '"limit":5')  # for a sync too large
PAGE = 200  # events a /messages page
GAP_EVENTS = 10_000  # of one room fetched for one gap, at most
DOWNLOAD_S = 300.0  # the longest one file's download may take, whole
ERROR_BODY = 64 * 1024  # of an error's answer to a download


class Unreachable(Exception):
    """The homeserver did not answer, or answered that it could not now; try again."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TooLarge(Unreachable):
    """An answer over `MAX_BODY`: asked again as it is, it would be as large."""


class Refused(Exception):
    """The homeserver refused the call (a 4xx); `code` is its `errcode`."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class FileTooLarge(Refused):
    """A file over the most the gateway takes (`most` bytes): not read past it."""

    def __init__(self, message: str, most: int) -> None:
        super().__init__(message, "too_large")
        self.most = most


def _path(part: str) -> str:
    return quote(part, safe="")


class Matrix:
    """The bot's account on `homeserver`, signed in with `token`."""

    def __init__(
        self, http: httpx.AsyncClient, homeserver: str, user_id: str, token: str,
        sync_timeout_s: float = 30.0,
    ) -> None:  # fmt: skip
        self._http = http
        self._base = homeserver.rstrip("/")
        self.user_id = user_id
        self._token = token
        self._sync_timeout_s = sync_timeout_s

    async def call(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None,
        timeout: float = 30.0, token: bool = True,
    ) -> dict[str, Any]:  # fmt: skip
        """One API call: its answer, a JSON object of at most `MAX_BODY` bytes.

        Raises:
            Unreachable: not answered, a 5xx, a 429, or an answer that is not JSON.
            Refused: any other 4xx.
        """
        headers = {"Authorization": f"Bearer {self._token}"} if token else {}
        try:
            async with self._http.stream(
                method, self._base + path, json=body, params=params, headers=headers,
                timeout=httpx.Timeout(timeout, connect=10.0),
            ) as response:  # fmt: skip
                data = await _bounded(response)
        except httpx.HTTPError as error:
            raise Unreachable(f"{method} {path.split('?')[0]}: {error!r}") from error
        return _answered(f"{method} {path}", response.status_code, data)

    def use_token(self, token: str) -> None:
        self._token = token

    async def login(self, password: str, device_name: str) -> tuple[str, str]:
        """Sign in with the password: the new token and the device's id."""
        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": self.user_id},
            "password": password,
            "initial_device_display_name": device_name,
        }
        answer = await self.call("POST", f"{_API}/login", body, token=False)
        token, device = answer.get("access_token"), answer.get("device_id")
        if not isinstance(token, str) or not isinstance(device, str):
            raise Unreachable("the login's answer holds no access token")
        self._token = token
        return token, device

    async def whoami(self) -> str:
        user = (await self.call("GET", f"{_API}/account/whoami")).get("user_id")
        return user if isinstance(user, str) else ""

    async def hear(self, position: str | None) -> Batch:
        """The next `/sync` after `position`. A room whose timeline left events out (more came
        since the last sync than one brings, or a sync too large was asked again for less) has
        them fetched page by page (`/messages` from `position`), so none is lost; past
        `GAP_EVENTS` a room's oldest are, and the batch names it."""
        params = {"filter": SYNC_FILTER, "timeout": "0"}
        if position is not None:
            params |= {"since": position, "timeout": str(int(self._sync_timeout_s * 1000))}
        try:
            answer = await self._sync(params)
        except TooLarge:  # a long absence in busy rooms: ask for less, and page the rest
            answer = await self._sync(params | {"filter": SMALL_FILTER})
        if position is not None and (gaps := gaps_of(answer)):
            filled = {}
            for room, until in gaps.items():
                if (events := await self._fill(room, position, until)) is not None:
                    filled[room] = events
            with_gaps_filled(answer, filled)
        batch = batch_of(answer, self.user_id, first=position is None)
        if batch is None:
            raise Unreachable("the /sync answer holds no next_batch")
        return batch

    async def _sync(self, params: dict[str, str]) -> dict[str, Any]:
        return await self.call(
            "GET", f"{_API}/sync", params=params, timeout=self._sync_timeout_s + 30
        )

    async def _fill(self, room: str, since: str, until: str) -> list[Any] | None:
        """The room's events from `since` to `until`, oldest first; None when there are more
        than `GAP_EVENTS` (the oldest are then lost: the batch says so)."""
        events: list[Any] = []
        start = since
        path = f"{_API}/rooms/{_path(room)}/messages"
        while len(events) < GAP_EVENTS:
            params = {"from": start, "to": until, "dir": "f", "limit": str(PAGE)}
            page = await self.call("GET", path, params=params)
            chunk, end = page.get("chunk"), page.get("end")
            if not isinstance(chunk, list) or not chunk:
                return events
            events += chunk
            if not isinstance(end, str) or end == start:
                return events
            start = end
        return None

    async def post(
        self, room: str, text: str, *, key: str, html: str | None = None,
        reply_to: str | None = None, notice: bool = False,
    ) -> str:  # fmt: skip
        content = message_body(text, html, notice=notice, reply_to=reply_to)
        return await self._send(room, "m.room.message", content, key)

    async def edit(self, room: str, target: str, text: str, *, key: str, html: str | None) -> None:
        await self._send(room, "m.room.message", edit_body(target, text, html), key)

    async def react(self, room: str, target: str, emoji: str, *, key: str) -> None:
        relates = {"rel_type": "m.annotation", "event_id": target, "key": emoji}
        await self._send(room, "m.reaction", {"m.relates_to": relates}, key)

    async def _send(self, room: str, kind: str, content: dict[str, Any], key: str) -> str:
        path = f"{_API}/rooms/{_path(room)}/send/{kind}/{_path(key)}"
        event_id = (await self.call("PUT", path, content)).get("event_id")
        if not isinstance(event_id, str):
            raise Unreachable(f"the homeserver gave no event id for a message in {room}")
        return event_id

    async def typing(self, room: str, on: bool) -> None:
        body: dict[str, Any] = {"typing": on} | ({"timeout": 30_000} if on else {})
        await self.call("PUT", f"{_API}/rooms/{_path(room)}/typing/{_path(self.user_id)}", body)

    async def join(self, room: str) -> None:
        await self.call("POST", f"{_API}/join/{_path(room)}", {})

    async def leave(self, room: str) -> None:
        await self.call("POST", f"{_API}/rooms/{_path(room)}/leave", {})

    async def download(self, source: str, most: int) -> bytes:
        """The bytes of the media `source` names (an `mxc://` URI), asked of this homeserver
        with the bot's token (the authenticated media API; the old unauthenticated one only
        when the homeserver does not know that API), at most `most` of them.

        Raises:
            FileTooLarge: over `most` bytes, by its Content-Length or as it came.
            Refused: `source` is not an `mxc://` URI, or the homeserver refused (no such
                media, say, or it would send it encoded).
            Unreachable: not answered, a 5xx, a 429, or not whole within `DOWNLOAD_S`.
        """
        paths = download_paths(source)
        if paths is None:
            raise Refused(f"{source[:100]!r} is not an mxc:// URI")
        authenticated, old = paths
        try:
            return await self._download(authenticated, most)
        except Refused as error:
            if error.code != "M_UNRECOGNIZED":
                raise
        log.info("the homeserver has no authenticated media API: the old one is asked")
        return await self._download(old, most)

    async def _download(self, path: str, most: int) -> bytes:
        # No encoding asked for, and none taken: what is counted is what is kept (a
        # compressed answer could grow past `most` in one piece as it is decoded).
        headers = {"Authorization": f"Bearer {self._token}", "Accept-Encoding": "identity"}
        with trio.move_on_after(DOWNLOAD_S):
            try:
                async with self._http.stream(
                    "GET", self._base + path, headers=headers, follow_redirects=True,
                    timeout=httpx.Timeout(60.0, connect=10.0),
                ) as response:  # fmt: skip
                    if response.status_code != 200:
                        data = await _bounded(response, ERROR_BODY)
                        _answered(f"GET {path}", response.status_code, data)
                        raise Unreachable(f"GET {path}: {response.status_code}, not the file")
                    encoding = response.headers.get("content-encoding", "identity").lower()
                    if encoding != "identity":
                        raise Refused(f"GET {path}: the file came encoded ({encoding[:40]!r})")
                    length = response.headers.get("content-length", "")
                    if length.isdigit() and int(length) > most:
                        raise FileTooLarge(f"it is {int(length):,} bytes", most)
                    return await _file(response, most)
            except httpx.HTTPError as error:
                raise Unreachable(f"GET {path}: {error!r}") from error
        raise Unreachable(f"GET {path}: not whole within {DOWNLOAD_S:g} s")


def _answered(what: str, status: int, data: bytes) -> dict[str, Any]:
    """The JSON object answered with `status`, or the error it says."""
    try:  # orjson: nesting to 1,024 deep, past what a homeserver's own parser takes
        answer = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError as error:
        raise Unreachable(f"{what}: the answer is not JSON: {error}") from error
    if not isinstance(answer, dict):
        raise Unreachable(f"{what}: the answer is not a JSON object")
    if status == 429 or status >= 500:
        after = answer.get("retry_after_ms")
        retry = after / 1000 if isinstance(after, int) and 0 <= after <= 3_600_000 else None
        raise Unreachable(f"{what}: {status} {_said(answer)}", retry)
    if status >= 400:
        code = answer.get("errcode")
        raise Refused(f"{what}: {status} {_said(answer)}", code if isinstance(code, str) else "")
    return answer


async def _bounded(response: httpx.Response, most: int | None = None) -> bytes:
    most = MAX_BODY if most is None else most
    parts, size = [], 0
    async for part in response.aiter_bytes():
        size += len(part)
        if size > most:
            raise TooLarge(f"an answer over {most:,} bytes; not read")
        parts.append(part)
    return b"".join(parts)


async def _file(response: httpx.Response, most: int) -> bytes:
    data = bytearray()
    async for part in response.aiter_bytes():  # no encoding: as they came
        if len(data) + len(part) > most:
            raise FileTooLarge(f"it is over {most:,} bytes", most)
        data += part
    return bytes(data)


def _said(answer: dict[str, Any]) -> str:
    error = answer.get("error")
    code = answer.get("errcode")
    return " ".join(str(x)[:300] for x in (code, error) if isinstance(x, str))
