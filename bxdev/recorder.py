"""The recorder: a proxy in front of a real llama-server that writes every exchange to a
`.http` recording (docs/recordings.md).

Each request is forwarded as it came (less hop-by-hop headers); the response streams back to
the client chunk by chunk as the server sends it, and is recorded byte for byte, so a
recording is exactly what passed. `Authorization`, `X-Api-Key` and cookies are never written.
The file is rewritten after every exchange, so an interrupted capture keeps what it had.

    python -m bxdev.recorder --upstream http://127.0.0.1:8080 \\
        --out recordings/NAME.http --note "what was captured and how"
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx
import trio

from boxmaker.proto import DecodeError, encode, parse_json
from boxmaker.testing import FakeResponse
from boxmaker.testing.recording import Exchange, Recording, dump_recording, without_secrets

__all__ = ["Recorder", "main"]

HOP_BY_HOP = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade"}
)


def provenance(upstream: str, notes: Sequence[str]) -> tuple[str, ...]:
    day = datetime.now(UTC).date().isoformat()
    return (
        f"Captured from a real llama-server at {upstream} by boxmaker's recorder "
        f"(python -m bxdev.recorder) on {day}.",
        *notes,
    )


class Recorder:
    """Forwards to `upstream` (which may be changed between exchanges) and records."""

    def __init__(self, upstream: str, out: Path, comments: Sequence[str]) -> None:
        self.upstream = upstream.rstrip("/")
        self.out = out
        self.comments = tuple(comments)
        self.exchanges: list[Exchange] = []
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(None))
        self._active = 0
        self._settled = trio.Event()
        self._settled.set()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def settled(self) -> None:
        """Return once no exchange is under way (each is recorded as its response ends)."""
        await self._settled.wait()

    def _begin(self) -> None:
        self._active += 1
        self._settled = trio.Event()

    def _end(self) -> None:
        self._active -= 1
        if not self._active:
            self._settled.set()

    def note_disconnect(self) -> None:
        pass  # what the client received up to then is what gets recorded

    def save(self) -> None:
        recording = Recording(comments=self.comments, exchanges=tuple(self.exchanges))
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_bytes(dump_recording(recording))

    async def handle(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        connected: Callable[[], Awaitable[None]],
    ) -> FakeResponse:
        await connected()
        forwarded = [(k, v) for k, v in headers.items() if k.lower() not in HOP_BY_HOP]
        request = self._http.build_request(
            method, self.upstream + path, headers=forwarded, content=body
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:  # not recorded: nothing passed
            message = encode({"error": {"code": 502, "message": str(exc), "type": "recorder"}})
            return FakeResponse(502, "Bad Gateway", [("Content-Type", "application/json")], message)
        try:
            request_body = parse_json(body) if body else None
        except DecodeError:
            request_body = body.decode(errors="replace")
        answer_headers = [(k.decode(), v.decode()) for k, v in response.headers.raw]
        reason = response.reason_phrase or "OK"

        self._begin()

        async def relay() -> AsyncIterator[bytes]:
            received = bytearray()
            chunks = cast(Any, response.aiter_raw())
            try:
                async for chunk in chunks:
                    received += chunk
                    yield chunk
            finally:
                with trio.CancelScope(shield=True):
                    await chunks.aclose()
                    await response.aclose()
                self.exchanges.append(
                    Exchange(
                        method=method,
                        path=path,
                        request_headers=without_secrets(forwarded),
                        request_body=request_body,
                        status=response.status_code,
                        reason=reason,
                        response_headers=tuple(answer_headers),
                        response_body=bytes(received),
                    )
                )
                self.save()
                self._end()

        return FakeResponse(response.status_code, reason, answer_headers, relay())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bxdev.recorder",
        description="Proxy to a real llama-server and record every exchange to a .http file.",
    )
    parser.add_argument("--upstream", required=True, help="the real server, http://host:port")
    parser.add_argument("--out", type=Path, required=True, help="the recording to write")
    parser.add_argument("--note", action="append", default=[], help="a comment line to add")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="where to listen; 0 picks one")
    args = parser.parse_args(argv)
    recorder = Recorder(args.upstream, args.out, provenance(args.upstream, args.note))

    async def run() -> None:
        from boxmaker.testing import serve_tcp

        async with trio.open_nursery() as nursery:
            port = await nursery.start(
                lambda task_status: serve_tcp(
                    recorder, host=args.host, port=args.port, task_status=task_status
                )
            )
            print(f"recording {args.upstream} at http://{args.host}:{port}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        trio.run(run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
