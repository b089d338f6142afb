"""`python -P proxy.py --upstream URL --log FILE`: a recording proxy in front of a server, so
the peers row sees every request exactly as a client sent it. Standard library only.

It forwards each request and streams the answer back as it comes, and appends one JSON line
per request to FILE: the method, path, status, the body as sent (text), and from the answer
the streamed text and the last `timings` and `usage` (llama-server's cache figures). The line
is written before the `[DONE]` event is passed on, so a client never has its answer before
its record is on file. It prints `listening on http://127.0.0.1:PORT` once ready.

TCP_NODELAY on both sides: without it every small SSE write waits for a delayed ACK (about
40 ms a turn).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["answer_stats", "main"]

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "upgrade"}
DONE = b"data: [DONE]"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream: str, log: Path) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.upstream = urllib.parse.urlsplit(upstream)
        self.log = log
        self.lock = threading.Lock()

    def record(self, line: dict[str, Any]) -> None:
        with self.lock, self.log.open("a") as out:
            out.write(json.dumps(line) + "\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the clients use it
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError):  # a client that left a kept-alive connection
            super().handle()

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if "chunked" in (self.headers.get("Transfer-Encoding") or ""):
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        return body

    def _forward(self) -> None:
        body = self._body()
        up = self.server.upstream
        start = time.monotonic()
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=600)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn.request(self.command, self.path, body=body, headers=headers)
        response = conn.getresponse()
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in HOP:
                self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        seen = bytearray()
        recorded = False

        def record() -> None:
            line = {
                "method": self.command,
                "path": self.path,
                "status": response.status,
                "secs": round(time.monotonic() - start, 4),
                "body": body.decode("utf-8", "surrogateescape"),
                **answer_stats(bytes(seen)),
            }
            self.server.record(line)

        while chunk := response.read1(65536):
            seen += chunk
            if not recorded and DONE in seen[-len(chunk) - len(DONE) :]:
                record()
                recorded = True
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        conn.close()
        if not recorded:
            record()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    do_GET = do_POST = _forward


def answer_stats(raw: bytes) -> dict[str, Any]:
    """From an SSE stream (or a JSON body): the streamed `answer` (and `reasoning`), and the
    last `timings` and `usage` seen."""
    out: dict[str, Any] = {}
    text: list[str] = []
    thought: list[str] = []
    events = [line[5:].strip() for line in raw.split(b"\n") if line.startswith(b"data:")]
    for event in events or [raw]:
        try:
            obj = json.loads(event)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        for key in ("timings", "usage"):
            if obj.get(key):
                out[key] = obj[key]
        for choice in obj.get("choices") or []:
            part = choice.get("delta") or choice.get("message") or {}
            text.append(part.get("content") or "")
            thought.append(part.get("reasoning_content") or "")
    out["answer"] = "".join(text)
    if any(thought):
        out["reasoning"] = "".join(thought)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="A recording proxy (the peers row).")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = _Server(args.port, args.upstream, args.log)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
