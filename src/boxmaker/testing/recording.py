"""Recordings: exchanges with llama-server kept as readable, diffable text (`.http`).

A file holds comment lines (`# ...`; the first says where the file came from: a capture by
the recorder, or why it is not one), then one or more exchanges:

    >>> POST /v1/chat/completions
    Content-Type: application/json

    {
      "messages": [...]
    }
    <<< 200 OK
    Content-Type: text/event-stream
    body: 1234 bytes
    data: {...}
    ...

The request is the method, path, headers (never `Authorization` or `X-Api-Key`) and the JSON
body, indented (a JSON value, compared as such). The response is the status, the headers and
`body: N bytes` followed by exactly those N bytes as the server sent them, then a newline.
docs/recordings.md describes it for people. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from attrs import frozen

__all__ = [
    "SECRET_HEADERS",
    "Exchange",
    "Recording",
    "RecordingError",
    "dump_recording",
    "load_recording",
]

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})
_REQUEST = ">>> "
_RESPONSE = "<<< "
_BODY = "body: "


class RecordingError(ValueError):
    """A recording file that does not follow the format; the message names the line."""


@frozen
class Exchange:
    method: str
    path: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: Any  # the JSON value sent, or None for no body
    status: int
    reason: str
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes

    def header(self, name: str) -> str | None:
        """A response header's value, by case-insensitive name."""
        wanted = name.lower()
        return next((v for k, v in self.response_headers if k.lower() == wanted), None)


@frozen
class Recording:
    comments: tuple[str, ...]
    exchanges: tuple[Exchange, ...]


def without_secrets(headers: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in headers if k.lower() not in SECRET_HEADERS)


def dump_recording(recording: Recording) -> bytes:
    """The file's bytes; secret request headers are left out whatever the exchange holds."""
    if not recording.comments:
        raise RecordingError("a recording starts with a comment saying where it came from")
    out = [f"# {line}\n".encode() for line in recording.comments]
    for ex in recording.exchanges:
        out.append(f"\n{_REQUEST}{ex.method} {ex.path}\n".encode())
        out += [f"{k}: {v}\n".encode() for k, v in without_secrets(ex.request_headers)]
        out.append(b"\n")
        if ex.request_body is not None:
            text = json.dumps(ex.request_body, indent=2, ensure_ascii=False)
            out.append(text.encode() + b"\n")
        out.append(f"{_RESPONSE}{ex.status} {ex.reason}\n".encode())
        out += [f"{k}: {v}\n".encode() for k, v in ex.response_headers]
        out.append(f"{_BODY}{len(ex.response_body)} bytes\n".encode())
        out.append(ex.response_body + b"\n")
    return b"".join(out)


def load_recording(data: bytes) -> Recording:
    """Parse a recording.

    Raises:
        RecordingError: naming the line that is not in the format.
    """
    reader = _Reader(data)
    comments: list[str] = []
    while reader.peek() is not None and reader.peek().startswith(b"#"):  # type: ignore[union-attr]
        comments.append(reader.line()[1:].strip())
    if not comments:
        raise RecordingError("line 1: a recording starts with a '# ' comment saying its origin")
    exchanges = []
    while reader.skip_blank():
        exchanges.append(_exchange(reader))
    return Recording(comments=tuple(comments), exchanges=tuple(exchanges))


def _exchange(reader: _Reader) -> Exchange:
    first = reader.line()
    if not first.startswith(_REQUEST):
        raise reader.error(f"expected '{_REQUEST}METHOD PATH'")
    method, _, path = first[len(_REQUEST) :].partition(" ")
    request_headers = reader.headers()
    body_lines = []
    body_start = reader.line_no + 1
    while (line := reader.peek()) is not None and not line.startswith(_RESPONSE.encode()):
        body_lines.append(reader.line())
    body_text = "\n".join(body_lines).strip()
    try:
        request_body = json.loads(body_text) if body_text else None
    except ValueError as exc:
        message = f"line {body_start}: the request body is not JSON: {exc}"
        raise RecordingError(message) from exc
    status_line = reader.line()
    if not status_line.startswith(_RESPONSE):
        raise reader.error(f"expected '{_RESPONSE}STATUS REASON'")
    status, _, reason = status_line[len(_RESPONSE) :].partition(" ")
    if not status.isdigit():
        raise reader.error(f"status {status!r} is not a number")
    response_headers = reader.headers(until_body=True)
    size_line = reader.line()
    size = size_line[len(_BODY) : -len(" bytes")]
    if not size_line.startswith(_BODY) or not size_line.endswith(" bytes") or not size.isdigit():
        raise reader.error(f"expected '{_BODY}N bytes'")
    body = reader.take(int(size))
    return Exchange(
        method=method,
        path=path,
        request_headers=request_headers,
        request_body=request_body,
        status=int(status),
        reason=reason,
        response_headers=response_headers,
        response_body=body,
    )


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        self.line_no = 0

    def error(self, message: str) -> RecordingError:
        return RecordingError(f"line {self.line_no}: {message}")

    def peek(self) -> bytes | None:
        if self._pos >= len(self._data):
            return None
        end = self._data.find(b"\n", self._pos)
        return self._data[self._pos : end if end >= 0 else len(self._data)]

    def line(self) -> str:
        raw = self.peek()
        if raw is None:
            raise self.error("unexpected end of file")
        self._pos += len(raw) + 1
        self.line_no += 1
        return raw.decode()

    def skip_blank(self) -> bool:
        """Skip blank lines; False at the end of the file."""
        while (line := self.peek()) is not None and not line.strip():
            self.line()
        return self.peek() is not None

    def headers(self, *, until_body: bool = False) -> tuple[tuple[str, str], ...]:
        found = []
        while (line := self.peek()) is not None:
            if (not line and not until_body) or (until_body and line.startswith(_BODY.encode())):
                if not line:
                    self.line()
                break
            name, sep, value = self.line().partition(": ")
            if not sep and not name.endswith(":"):
                raise self.error("expected 'Name: value'")
            found.append((name.rstrip(":"), value))
        return tuple(found)

    def take(self, size: int) -> bytes:
        body = self._data[self._pos : self._pos + size]
        if len(body) != size or self._data[self._pos + size : self._pos + size + 1] != b"\n":
            raise self.error(f"the body is not {size} bytes followed by a newline")
        self._pos += size + 1
        self.line_no += body.count(b"\n") + 1
        return body
