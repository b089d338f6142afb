"""The shape of a llama-server response: its structure, without ids, times, texts or counts.

Two responses to the same scripted case have the same shape when they have the same status
and content type, and the same sequence of event shapes: which keys each chunk has and in
what order, which kind of delta it carries (role, content, reasoning, a tool call's first
delta or an argument fragment), where `prompt_progress`, `usage` and `timings` sit, whether it
finishes, the keys of error bodies, and `[DONE]`. Runs of the same event shape count as one,
since the number of tokens or prompt batches is not structure. Pure.

This is what holds the fake server to the real one: `tests/testing/test_recordings.py` against
captured bytes, and the `verify-device` tier against a live server.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from ..loopd.infer.sse import END, NEED_DATA, SSEDecoder
from ..proto import DecodeError, parse_json

__all__ = ["Shape", "response_shape"]


@frozen
class Shape:
    status: int
    content_type: str
    body: tuple[str, ...]

    def describe(self) -> str:
        return "\n".join([f"{self.status} {self.content_type}", *self.body])


def _keys(obj: Any) -> str:
    """`a,b(c,d),e`: an object's keys in order, nested objects' keys in brackets."""
    if not isinstance(obj, dict):
        return type(obj).__name__
    return ",".join(
        f"{key}({_keys(value)})" if isinstance(value, dict) else key for key, value in obj.items()
    )


def _delta_kind(delta: dict[str, Any]) -> str:
    calls = delta.get("tool_calls")
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        entry = calls[0]
        return "tool_call(" + _keys(entry) + ")"
    return "delta(" + ",".join(delta) + ")"


def _event_shape(payload: str) -> str:
    if payload == "[DONE]":
        return "[DONE]"
    try:
        chunk = parse_json(payload)
    except DecodeError:
        return "not JSON"
    if not isinstance(chunk, dict):
        return f"not an object: {type(chunk).__name__}"
    if "error" in chunk:
        return "error " + _keys(chunk)
    parts = [",".join(chunk)]
    choices = chunk.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        delta = choice.get("delta")
        parts.append(_delta_kind(delta) if isinstance(delta, dict) else "no delta")
        if choice.get("finish_reason") is not None:
            parts.append("finish")
    for key in ("prompt_progress", "usage", "timings"):
        if key in chunk:
            parts.append(f"{key}({_keys(chunk[key])})")
    return " | ".join(parts)


def response_shape(status: int, headers: dict[str, str], body: bytes) -> Shape:
    """The shape of one response; `headers` may use any case for its names."""
    lowered = {k.lower(): v for k, v in headers.items()}
    content_type = lowered.get("content-type", "")
    shapes: list[str] = []
    if content_type.startswith("text/event-stream"):
        decoder = SSEDecoder()
        decoder.receive_data(body)
        decoder.receive_data(b"")
        while (payload := decoder.next_event()) not in (NEED_DATA, END):
            shapes.append(_event_shape(str(payload)))
    else:
        try:
            shapes.append("json " + _keys(parse_json(body)))
        except DecodeError:
            shapes.append("not JSON")
    collapsed = [s for i, s in enumerate(shapes) if i == 0 or s != shapes[i - 1]]
    return Shape(status, content_type, tuple(collapsed))
