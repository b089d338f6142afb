"""A tool call in one short line, for a channel to show beside its name (`tool_call_started`'s
`summary`): the argument that says most (a path, a command, a query...), else the arguments as
compact JSON, on one line, at most `SUMMARY_CHARS` characters. Pure; the model's text, so a
channel escapes it as it escapes anything the model wrote."""

from __future__ import annotations

from ..proto import DecodeError, encode, parse_json

__all__ = ["SUMMARY_CHARS", "call_summary"]

SUMMARY_CHARS = 80
_TELLING = ("path", "command", "code", "query", "pattern", "url", "when", "id", "name")


def call_summary(arguments: str) -> str:
    """The line for a call whose arguments are the JSON text `arguments` ("" for none, or for
    text that is not a JSON object)."""
    try:
        value = parse_json(arguments[: 64 * 1024])
    except DecodeError:
        return ""
    if not isinstance(value, dict) or not value:
        return ""
    said = next(
        (value[key] for key in _TELLING if isinstance(value.get(key), str) and value[key].strip()),
        None,
    )
    text = " ".join((said if said is not None else encode(value).decode()).split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"
