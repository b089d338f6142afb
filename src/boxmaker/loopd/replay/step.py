"""`loopd replay --step`: the replayed turns one record at a time, each request the loop made
shown before the completion it brought (its messages as sent, those the request before held
marked as the part the cache could keep), with `n`ext, `c`ontinue, `q`uit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TextIO

from ...proto import (
    AssistantRecord,
    ChatMessage,
    LogRecord,
    RecallRecord,
    ToolResultRecord,
    UsageRecord,
    UserRecord,
    unstructure,
)
from .tape import Place, Tape

__all__ = ["Request", "step_through"]

Request = tuple[Place, tuple[ChatMessage, ...]]  # where the loop asked, and what it sent
_SHOWN = 400  # the characters of a message or a record shown


def step_through(
    tape: Tape,
    start: Place,
    end: Place,
    requests: Sequence[Request],
    key: Callable[[], str],
    out: TextIO,
) -> bool:
    """Show the recorded records from `start` to `end` with the requests made before them;
    after each, `key()` says what next: "n" (or anything else) the next, "c" the rest without
    stopping, "q" stop. Whether the person quit."""
    asked = dict(requests)
    before: tuple[ChatMessage, ...] = ()
    stopping = True
    for place, record in _records(tape, start, end):
        messages = asked.get(place)
        if messages is not None:
            out.write(_request(place, messages, before))
            before = messages
        out.write(_record(place, record))
        if stopping:
            out.write("[n]ext, [c]ontinue, [q]uit? ")
            out.flush()
            answer = key().strip().lower()[:1]
            out.write("\n")
            if answer == "q":
                return True
            stopping = answer != "c"
    return False


def _records(tape: Tape, start: Place, end: Place) -> list[tuple[Place, LogRecord]]:
    found = []
    for epoch in range(start[0], end[0] + 1):
        first = start[1] if epoch == start[0] else 0
        last = end[1] if epoch == end[0] else len(tape.epochs[epoch]) - 1
        found += [((epoch, at), tape.epochs[epoch][at]) for at in range(first, last + 1)]
    return found


def _request(
    place: Place, messages: tuple[ChatMessage, ...], before: tuple[ChatMessage, ...]
) -> str:
    held = 0
    while held < min(len(messages), len(before)) and messages[held] == before[held]:
        held += 1
    lines = [
        f"── request before epoch {place[0]} line {place[1] + 1}: {len(messages)} messages, "
        f"the first {held} as the request before sent them (what the cache can keep)"
    ]
    for number, message in enumerate(messages):
        if number < held:
            continue
        raw = unstructure(message)
        calls = ", ".join(
            f"{call['function']['name']}({_short(call['function']['arguments'], 80)})"
            for call in raw.get("tool_calls") or ()
        )
        text = _short(str(raw.get("content") or "")) + (f" [calls {calls}]" if calls else "")
        lines.append(f"   + {raw.get('role')}: {text}")
    return "\n".join(lines) + "\n"


def _record(place: Place, record: LogRecord) -> str:
    raw = unstructure(record)
    kind = raw["type"]
    head = f"{place[0]}:{place[1] + 1} {kind}"
    if isinstance(record, UserRecord):
        return f"{head}: {_short(record.content)}\n"
    if isinstance(record, AssistantRecord):
        calls = ", ".join(f"{c.name}({_short(c.arguments, 80)})" for c in record.tool_calls or ())
        text = _short(record.content or "")
        return f"{head}: {text}" + (f" [calls {calls}]" if calls else "") + "\n"
    if isinstance(record, UsageRecord):
        return (
            f"{head}: {record.cache_n:,} tokens from the cache, {record.prompt_n:,} processed, "
            f"{record.predicted_n:,} predicted\n"
        )
    if isinstance(record, ToolResultRecord | RecallRecord):
        return f"{head} ({record.data_class.value}): {_short(record.content)}\n"
    fields = {k: v for k, v in raw.items() if k not in ("type", "time")}
    return f"{head}: {_short(str(fields))}\n"


def _short(text: str, most: int = _SHOWN) -> str:
    text = text.replace("\n", "⏎ ")
    return text if len(text) <= most else text[: most - 1] + "…"
