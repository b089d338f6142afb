"""What the recall index holds of the notes and the logs: an `Entry` per passage worth finding
again, with where it came from. Pure.

A log is read once, in order, a part at a time as it grows (`log_entries` takes up where the
`Cursor` stands and returns the next one). It gives:

- the user's messages, the model's answers (their text, not their reasoning) and the tools'
  results, each with its session, epoch, turn (numbered in the whole session) and time; a
  result keeps `untrusted` and the tool it came from;
- each summary an epoch opened with or ended with (`summary`, `epoch_end`), once per session
  (`Entry.summary` names it: level, first and last epoch), so every epoch's summary stays
  findable however far the opening has moved on.

Provenance is kept as the conversation keeps it (`session.provenance`): once an untrusted
result is in an epoch (a carried one, an auto-recall that brought one, or a tainted summary it
opened with), the model's answers after it, and that epoch's summary, are untrusted too (the
model may repeat what a file planted); the user's messages never are. Once a secret is in an
epoch (a secret result, or a summary made from a conversation that held one), nothing the
model or a tool says after it is indexed, nor any summary made from it: the model may repeat
the secret, and no other conversation may recall it.

Not indexed: the turns a new epoch carried (they were indexed in the epoch they were said
in), what recall itself brought back (an auto-recall, a `recall` call's result, directly or
through `call_tool`: memory must not echo itself), `read_result`'s parts of a result already
indexed, loopd's own words (healing results, wrap-ups), and whatever is secret, which must not
travel into other conversations. A note is an entry until it is withdrawn; a secret note (made
while its conversation held a secret) never is one.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from attrs import frozen

from ..proto import (
    AssistantRecord,
    Baseline,
    DecodeError,
    EpochEndRecord,
    EpochStartRecord,
    ForgetRecord,
    LogRecord,
    NoteRecord,
    NotesRecord,
    SessionStartRecord,
    SummaryPart,
    SummaryRecord,
    ToolCall,
    ToolResultRecord,
    TurnEndRecord,
    UserRecord,
    parse_json,
)
from ..session import (
    INTERRUPTED,
    UNKNOWN_OUTCOME,
    calls_of,
    end_parts,
    is_secret,
    is_tainted,
    summary_part,
)
from ..tools import CALL_TOOL, READ_RESULT, RECALL

__all__ = ["MAX_TEXT", "Cursor", "Entry", "log_entries", "note_entries"]

MAX_TEXT = 32 * 1024  # characters of one entry's text kept: a passage, not a document
_ECHOES = frozenset((RECALL.name, READ_RESULT.name))  # what was indexed already
_LOOPD_WORDS = frozenset((INTERRUPTED, UNKNOWN_OUTCOME))


@frozen
class Entry:
    """One passage: its `kind` (`user`, `assistant`, `tool`, `summary`, `note`), its text,
    and where it came from. `seq` is its line in its file."""

    kind: str
    text: str
    seq: int
    time: str
    session: str | None = None
    epoch: int | None = None
    turn: int | None = None
    untrusted: bool = False
    tool: str | None = None  # a result's tool
    summary: str | None = None  # a summary's `<level>:<first>:<last>`
    note: str | None = None  # a note's id
    pinned: bool = False


@frozen
class Cursor:
    """Where the reading of one epoch's log stands, between two parts of it: the epoch, the
    turns the session has ended so far, the carried turns still to pass over, the calls of
    the last completion by id (the tool each runs), whether the epoch holds an untrusted
    result yet, whether it opened with a summary from before levels, and whether it holds a
    secret yet."""

    epoch: int = 0
    turns: int = 0
    skip: int = 0
    calls: tuple[tuple[str, str], ...] = ()
    tainted: bool = False
    legacy: bool = False
    secret: bool = False


def log_entries(
    records: Sequence[LogRecord],
    cursor: Cursor,
    session: str,
    first_seq: int,
    baseline: Baseline | None = None,
) -> tuple[list[Entry], Cursor]:
    """The entries of `records`, the lines `first_seq`, `first_seq + 1`, ... of a log of
    `session` whose reading stood at `cursor`; and where it stands after them. `baseline` is
    the epoch's (a fenced session's calls are the tool blocks of its answers)."""
    found: list[Entry] = []
    epoch, turns, skip, calls = cursor.epoch, cursor.turns, cursor.skip, dict(cursor.calls)
    tainted, legacy, secret = cursor.tainted, cursor.legacy, cursor.secret
    for seq, record in enumerate(records, first_seq):
        said = Entry("", "", seq, str(record.time), session, epoch, turns + 1)
        if isinstance(record, SessionStartRecord):
            epoch, tainted, legacy, secret = record.epoch, False, False, False
        elif isinstance(record, EpochStartRecord):
            turns, skip = record.turns, record.carried_turns
        elif isinstance(record, TurnEndRecord):
            turns, skip = turns + 1, max(0, skip - 1)
        elif isinstance(record, SummaryRecord | EpochEndRecord):
            legacy = legacy or (isinstance(record, SummaryRecord) and record.first is None)
            parts = _parts(record, epoch, legacy)
            if isinstance(record, EpochEndRecord) and record.summary is not None:
                own = parts[-1]  # this epoch's own summary: of what it held (an old record
                parts[-1] = attrs.evolve(
                    own,
                    tainted=own.tainted or tainted,  # says nothing)
                    secret=own.secret or secret,
                )
            for part in parts:
                if part.secret:
                    continue  # it may repeat a secret
                key = f"{part.level}:{part.first}:{part.last}"
                found += _said(
                    Entry("", "", seq, said.time, session, epoch),
                    "summary",
                    part.text,
                    part.tainted,
                    summary=key,
                )
        tainted = tainted or is_tainted(record)  # (a carried one too)
        secret = secret or is_secret(record)
        if skip or not isinstance(record, UserRecord | AssistantRecord | ToolResultRecord):
            continue  # a carried turn: indexed in the epoch it was said in
        if isinstance(record, UserRecord):
            found += _said(said, "user", record.content)
        elif isinstance(record, AssistantRecord):
            calls = {call.id: _runs(call) for call in calls_of(record, baseline)}
            if not secret:
                found += _said(said, "assistant", record.content, tainted)
        else:
            tool = calls.get(record.tool_call_id)
            if tool not in _ECHOES and not secret and record.content not in _LOOPD_WORDS:
                found += _said(said, "tool", record.content, record.untrusted, tool)
    return found, Cursor(epoch, turns, skip, tuple(calls.items()), tainted, legacy, secret)


def _runs(call: ToolCall) -> str:
    """The tool a call runs: `call_tool`'s target by its name."""
    if call.name != CALL_TOOL.name:
        return call.name
    try:
        target = parse_json(call.arguments)
    except DecodeError:
        return call.name
    name = target.get("name") if isinstance(target, dict) else None
    return name if isinstance(name, str) else call.name


def _said(
    where: Entry,
    kind: str,
    text: str | None,
    untrusted: bool = False,
    tool: str | None = None,
    summary: str | None = None,
) -> list[Entry]:
    """An entry of `text` said at `where`, or none for a text of white space alone."""
    if text is None or not text.strip():
        return []
    return [
        Entry(
            kind,
            text[:MAX_TEXT],
            where.seq,
            where.time,
            where.session,
            where.epoch,
            where.turn,
            untrusted,
            tool,
            summary,
        )
    ]


def _parts(record: SummaryRecord | EpochEndRecord, epoch: int, legacy: bool) -> list[SummaryPart]:
    """The summaries a `summary` or `epoch_end` record of epoch `epoch` holds (`legacy`: the
    epoch opened with a summary from before levels)."""
    if isinstance(record, SummaryRecord):
        return [summary_part(record, epoch)]
    return end_parts(record, legacy=legacy)


def note_entries(records: Sequence[NotesRecord], first_seq: int) -> tuple[list[Entry], list[str]]:
    """The entries of notes made in `records` (lines `first_seq`, ...), and the ids of the
    notes they withdraw (a note made and withdrawn in the same part is in neither)."""
    made: dict[str, Entry] = {}
    withdrawn: list[str] = []
    for seq, record in enumerate(records, first_seq):
        if isinstance(record, ForgetRecord):
            if made.pop(record.id, None) is None:
                withdrawn.append(record.id)
            continue
        assert isinstance(record, NoteRecord)
        if record.secret:
            continue  # made while its conversation held a secret: never recalled
        origin = None if record.session is None else record.session.value
        made[record.id] = Entry(
            "note",
            record.text[:MAX_TEXT],
            seq,
            str(record.time),
            origin,
            None,
            record.turn,
            record.untrusted,
            note=record.id,
            pinned=record.pin,
        )
    return list(made.values()), withdrawn
