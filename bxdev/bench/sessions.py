"""Long sessions for the resume and request-building rows, written straight to disk.

A session's history is turns of seven records: a user message, an assistant message with a tool
call and its usage, the tool's result, the answer and its usage, and the turn's end, with text
of realistic length (about 2 kB a turn). Lines are written with the project's own encoder and
hash chain, as loopd writes them, but in one write and without an fsync per record.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import trio

from boxmaker import layout
from boxmaker.clock import SystemClock
from boxmaker.proto import (
    AssistantRecord,
    DataClass,
    LogRecord,
    Outcome,
    SessionId,
    ToolCall,
    ToolResultRecord,
    TurnEndRecord,
    UsageRecord,
    UserRecord,
    dumps,
)
from boxmaker.session import assemble_baseline, seal
from boxmaker.store import Store

from .harness import SYSTEM

__all__ = ["history", "until_completion", "write_session"]


def history() -> Iterator[LogRecord]:
    """The records of a session after its `session_start`, without end."""
    clock = SystemClock()
    for number in itertools.count(1):
        now = clock.now()
        call = ToolCall(
            id=f"call{number:012d}abcdefghijklmnopqrst",
            name="call_tool",
            arguments=json.dumps({"name": "web_search", "arguments": {"q": f"item {number}"}}),
        )
        usage = UsageRecord(time=now, cache_n=1000 + 90 * number, prompt_n=40, predicted_n=60,
                            reasoning_tokens=0, thinking_capped=False)  # fmt: skip
        yield UserRecord(time=now, content=f"Question {number}: " + "what about this? " * 5)
        yield AssistantRecord(time=now, content=None, reasoning_content=None, tool_calls=(call,))
        yield usage
        yield ToolResultRecord(
            time=now,
            call=number,
            tool_call_id=call.id,
            content=f"Result {number}. " + "A line of a search result, as a tool returns it. " * 11,
            data_class=DataClass.PUBLIC,
            untrusted=True,
            truncated=False,
        )
        yield AssistantRecord(
            time=now,
            content=f"About question {number}: " + "here is what the search found. " * 10,
            reasoning_content=None,
            tool_calls=None,
        )
        yield usage
        yield TurnEndRecord(time=now, outcome=Outcome.DONE, completions=2, tool_calls=1,
                            prompt_n=80, cache_n=2000 + 180 * number, predicted_n=120,
                            ms=1500)  # fmt: skip


def until_completion(number: int) -> list[LogRecord]:
    """The history up to the request for completion `number` (1 is the first)."""
    records: list[LogRecord] = []
    completions = 0
    for record in history():
        if isinstance(record, UserRecord | ToolResultRecord) and completions == number - 1:
            records.append(record)
            return records
        records.append(record)
        completions += isinstance(record, AssistantRecord)
    raise AssertionError("history() never ends")


async def write_session(
    home: Path, session: str, records: Iterable[LogRecord], *, index: bool = False
) -> int:
    """Create `session` in `home` with `records` after its `session_start`, and with `index`
    its `index.json` as loopd keeps it; the log's size."""
    store = Store(home, SystemClock())
    opened = store.create(SessionId(session), assemble_baseline(SYSTEM, None), "main")
    opened.close()
    lines, link, summary = [], opened.state.link, opened.index
    for record in records:
        line, link = seal(dumps(record), link)
        lines.append(line)
        summary = summary.after(record, link)
    if index:
        (opened.log_path.parent / layout.INDEX).write_bytes(dumps(summary) + b"\n")
    return await trio.to_thread.run_sync(_append, opened.log_path, b"".join(lines))


def _append(path: Path, data: bytes) -> int:
    with path.open("ab") as log:
        log.write(data)
    return path.stat().st_size
