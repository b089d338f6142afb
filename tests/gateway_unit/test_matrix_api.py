"""The Matrix client's answers, bounded and sorted (`gatewayd.matrix.api`), and the waits
before asking again (`gatewayd.retry`). The homeserver here is httpx's mock transport: these
check the client's reading of bytes; the tier against a real Synapse checks the rest."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import httpx
import pytest

from boxmaker.gatewayd.matrix import Matrix, Refused, Unreachable, api
from boxmaker.gatewayd.retry import MAX_WAIT_S, wait_of


def client(answer: Callable[[httpx.Request], httpx.Response]) -> Matrix:
    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return Matrix(http, "http://hs:8008", "@bot:hs", "token")


async def test_a_body_over_the_bound_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "MAX_BODY", 1000)
    big = client(lambda _: httpx.Response(200, content=b'{"next_batch": "' + b"x" * 5000 + b'"}'))
    with pytest.raises(Unreachable, match="over 1,000 bytes"):
        await big.hear("s1")


async def test_the_homeserver_s_refusals_and_waits() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/sync"):
            return httpx.Response(429, json={"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 2500})
        if path.endswith("/whoami"):
            return httpx.Response(401, json={"errcode": "M_UNKNOWN_TOKEN", "error": "gone"})
        if "/join/" in path:
            return httpx.Response(502, content=b"<html>bad gateway</html>")
        return httpx.Response(200, json={"no": "event id"})

    matrix = client(answer)
    with pytest.raises(Unreachable) as limited:
        await matrix.hear("s1")
    assert limited.value.retry_after == 2.5
    assert wait_of(0, limited.value) == 2.5
    with pytest.raises(Refused) as refused:
        await matrix.whoami()
    assert refused.value.code == "M_UNKNOWN_TOKEN"
    with pytest.raises(Unreachable, match="not JSON"):
        await matrix.join("!r:hs")
    with pytest.raises(Unreachable, match="no event id"):
        await matrix.post("!r:hs", "hi", key="k1")


async def test_a_sync_without_next_batch_is_no_sync() -> None:
    matrix = client(lambda _: httpx.Response(200, json={"rooms": {}}))
    with pytest.raises(Unreachable, match="no next_batch"):
        await matrix.hear(None)


async def test_a_post_s_key_is_its_transaction_id_and_room_ids_are_quoted() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"event_id": "$e1"})

    matrix = client(answer)
    assert await matrix.post("!r/../x:hs", "hi", key="abc", reply_to="$q") == "$e1"
    (request,) = seen
    assert request.url.raw_path.decode().endswith(
        "/rooms/%21r%2F..%2Fx%3Ahs/send/m.room.message/abc"
    )
    assert json.loads(request.content)["m.relates_to"] == {"m.in_reply_to": {"event_id": "$q"}}
    assert request.headers["authorization"] == "Bearer token"


def test_waits_double_with_jitter_up_to_a_minute() -> None:
    rng = random.Random(7)
    waits = [wait_of(attempt, None, rng) for attempt in range(12)]
    assert all(
        0.75 * min(0.5 * 2**n, MAX_WAIT_S) <= w <= min(0.5 * 2**n, MAX_WAIT_S)
        for n, w in enumerate(waits)
    )
    assert max(waits) <= MAX_WAIT_S
    assert waits[-1] >= 0.75 * MAX_WAIT_S


def said(event_id: str, body: str) -> dict[str, object]:
    return {"type": "m.room.message", "sender": "@o:hs", "event_id": event_id,
            "content": {"msgtype": "m.text", "body": body}}  # fmt: skip


async def test_a_gap_is_paged_back_and_a_sync_too_large_asked_for_less(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(api, "MAX_BODY", 4000)
    asked: list[httpx.Request] = []
    pages = {"s1": (["$1", "$2"], "t2"), "t2": (["$3"], "t3"), "t3": ([], "t3")}

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        if request.url.path.endswith("/sync"):
            if '"limit":1000' in request.url.params["filter"]:
                return httpx.Response(200, content=b" " * 5000)  # too large: asked for less
            timeline = {"events": [said("$4", "four")], "limited": True, "prev_batch": "p4"}
            return httpx.Response(
                200, json={"next_batch": "s2", "rooms": {"join": {"!r": {"timeline": timeline}}}}
            )
        assert request.url.params["to"] == "p4"
        ids, end = pages[request.url.params["from"]]
        return httpx.Response(200, json={"chunk": [said(i, i) for i in ids], "end": end})

    batch = await client(answer).hear("s1")
    assert [h.event_id for h in batch.heard] == ["$1", "$2", "$3", "$4"]  # type: ignore[union-attr]
    assert batch.gaps == ()
    assert '"limit":5' in asked[1].url.params["filter"]


async def test_a_gap_past_its_bound_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "GAP_EVENTS", 2)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/sync"):
            timeline = {"events": [said("$9", "nine")], "limited": True, "prev_batch": "p9"}
            return httpx.Response(
                200, json={"next_batch": "s2", "rooms": {"join": {"!r": {"timeline": timeline}}}}
            )
        start = request.url.params["from"]
        return httpx.Response(200, json={"chunk": [said(f"${start}", "x")], "end": start + "+"})

    batch = await client(answer).hear("s1")
    assert [h.event_id for h in batch.heard] == ["$9"]  # type: ignore[union-attr]
    assert batch.gaps == ("!r",)  # the gateway's log says the oldest are lost
