"""A file's download (`gatewayd.matrix.api.Matrix.download`): asked of the gateway's own
homeserver with its token on the authenticated media API (the old one only when that API is
unknown there), never read past the most the gateway takes, in bytes or in time. The
homeserver here is httpx's mock transport; the tier against a real Synapse checks the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import trio

from boxmaker.gatewayd.matrix import FileTooLarge, Matrix, Refused, Unreachable, api

URL = "mxc://remote.example:8448/AbC_1"
V1 = "/_matrix/client/v1/media/download/remote.example%3A8448/AbC_1"
OLD = "/_matrix/media/v3/download/remote.example%3A8448/AbC_1"
CHUNK = 100


def client(answer: Callable[[httpx.Request], httpx.Response]) -> tuple[Matrix, list[str]]:
    asked: list[str] = []

    def noted(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.raw_path.decode())
        return answer(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(noted))
    return Matrix(http, "http://hs:8008", "@bot:hs", "token"), asked


class Drip:
    """An answer's body in `CHUNK`-byte pieces, `pieces` of them, each counted as it is
    read."""

    def __init__(self, pieces: int) -> None:
        self.pieces = pieces
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.read < self.pieces:
            self.read += 1
            yield b"x" * CHUNK


async def test_the_authenticated_api_with_the_token_and_no_encoding() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"hello")

    matrix, asked = client(answer)
    assert await matrix.download(URL, 5) == b"hello"
    assert asked == [V1]
    assert seen[0].headers["authorization"] == "Bearer token"
    assert seen[0].headers["accept-encoding"] == "identity"


async def test_a_file_said_to_be_larger_is_refused_unread() -> None:
    drip = Drip(3)
    matrix, _ = client(
        lambda _: httpx.Response(200, headers={"Content-Length": "301"}, content=drip)
    )
    with pytest.raises(FileTooLarge) as refused:
        await matrix.download(URL, 300)
    assert refused.value.most == 300
    assert drip.read == 0


async def test_a_file_larger_than_it_said_is_not_read_past_the_most() -> None:
    long = Drip(10_000)  # a megabyte, said to be 5 bytes
    matrix, _ = client(lambda _: httpx.Response(200, headers={"Content-Length": "5"}, content=long))
    with pytest.raises(FileTooLarge, match="over 1,000 bytes"):
        await matrix.download(URL, 1000)
    assert long.read == 1000 // CHUNK + 1  # the piece that passed the most, and no more
    whole = Drip(10)
    matrix, _ = client(lambda _: httpx.Response(200, content=whole))
    assert await matrix.download(URL, 1000) == b"x" * 1000


async def test_a_download_that_does_not_end_in_time_is_given_up(autojump_clock: object) -> None:
    class Slow(Drip):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            while True:
                await trio.sleep(10)
                yield b"x"

    matrix, _ = client(lambda _: httpx.Response(200, content=Slow(0)))
    with pytest.raises(Unreachable, match="not whole within 300 s"):
        await matrix.download(URL, 10**6)
    assert trio.current_time() == pytest.approx(api.DOWNLOAD_S)


async def test_the_old_api_only_where_the_new_one_is_unknown() -> None:
    def unknown(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/_matrix/client/v1/"):
            return httpx.Response(404, json={"errcode": "M_UNRECOGNIZED", "error": "?"})
        return httpx.Response(200, content=b"old")

    matrix, asked = client(unknown)
    assert await matrix.download(URL, 10) == b"old"
    assert asked == [V1, OLD]
    gone, asked = client(lambda _: httpx.Response(404, json={"errcode": "M_NOT_FOUND"}))
    with pytest.raises(Refused) as refused:
        await gone.download(URL, 10)
    assert refused.value.code == "M_NOT_FOUND"
    assert asked == [V1]


async def test_what_is_not_the_file_is_refused_or_tried_again() -> None:
    matrix, asked = client(lambda _: httpx.Response(200, content=b"x"))
    with pytest.raises(Refused, match="not an mxc:// URI"):
        await matrix.download("mxc://../x", 10)
    assert asked == []  # nothing was asked
    packed = {"Content-Encoding": "gzip"}
    matrix, _ = client(lambda _: httpx.Response(200, headers=packed, content=b"\x1f\x8b"))
    with pytest.raises(Refused, match="came encoded"):
        await matrix.download(URL, 10)
    matrix, _ = client(lambda _: httpx.Response(502, json={"errcode": "M_UNKNOWN"}))
    with pytest.raises(Unreachable, match="502"):
        await matrix.download(URL, 10)
    matrix, _ = client(lambda _: httpx.Response(204))
    with pytest.raises(Unreachable, match="not the file"):
        await matrix.download(URL, 10)
