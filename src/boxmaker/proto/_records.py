"""Log records: one per line of `<id>/<epoch>.jsonl`, the whole state of a session.

Each record is written once and never changed; the converter owns their JSON shape
(`{"type": ..., <fields in this order>}`) and the golden files in `tests/fixtures/` pin it.
"""

from __future__ import annotations

import enum
import re

from attrs import Attribute, field, frozen

from ._attach import TurnFile
from ._chat import ChatMessage, ToolCall, ToolSchema, Usage
from ._epoch_records import EpochEndRecord, EpochStartRecord, SummaryPart, SummaryRecord
from ._ids import InvalidValue, Origin, SessionId, Timestamp
from ._settings import TurnSettings
from ._tools import Answer, DataClass, Mode
from ._undo import ModeRecord, UndoRecord

__all__ = [
    "ApprovalRecord",
    "ApprovedBy",
    "AssistantRecord",
    "Baseline",
    "BreakAt",
    "BreakRecord",
    "CacheLossRecord",
    "CallSentRecord",
    "EpochEndRecord",
    "EpochStartRecord",
    "Fenced",
    "Fork",
    "KeptPart",
    "LogRecord",
    "LossCause",
    "Outcome",
    "RecallRecord",
    "SessionStartRecord",
    "SummaryPart",
    "SummaryRecord",
    "ToolResultRecord",
    "TurnEndRecord",
    "UsageRecord",
    "UserRecord",
    "WrapUpReason",
    "WrapUpRecord",
]

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _check_sha256(_instance: object, attribute: Attribute[str], value: str) -> None:
    if type(value) is not str or not _SHA256.fullmatch(value):
        raise InvalidValue(f"{value!r} is not a sha256 in lowercase hex", attribute.name)


def _check_results(_instance: object, attribute: Attribute[str], value: str) -> None:
    if value not in ("user", "tool"):
        raise InvalidValue(f"expected 'user' or 'tool', got {value!r}", attribute.name)


@frozen
class Fenced:
    """How tool calls travel in a fenced session (the model writes tool blocks in its text):
    each result goes back as a user message `prefix + content + suffix` (`results` "user") or
    as a tool message (`results` "tool"); `examples` are the exchanges every request carries
    after the system message."""

    results: str = field(validator=_check_results)
    prefix: str
    suffix: str
    examples: tuple[ChatMessage, ...]


@frozen
class Baseline:
    """What every request of an epoch starts with: `<id>/<epoch>.baseline.json`. `fenced` is
    absent (None) in a session whose tools travel natively, as the `tools` array of each
    request. `memory` is the part of `system` that came from the owner's memory (`core.md` and
    the pinned notes, as they were when the baseline was made; "" for none): the next epoch's
    baseline has the same system prompt before it and the memory of its own day. None in a
    baseline made before memory, whose epochs all repeat its bytes."""

    system: str
    tools: tuple[ToolSchema, ...]
    fenced: Fenced | None = None
    memory: str | None = None


# Left out of the JSON when unset, so a record written before the field existed stays the same
# bytes (`cache_loss`'s `cause` and `detail`, `usage`'s `stopped`, `wrap_up`'s `reason`,
# `tool_result`'s `whole` came after their records' first version).
_OMIT = {"omit_if_default": True}


def _check_origin(instance: object, attribute: Attribute[str], value: str) -> None:
    if value != "":
        _check_sha256(instance, attribute, value)


@frozen
class Fork:
    """Where a forked session came from: the session and the turns of it it began with."""

    session: SessionId
    turn: int


@frozen
class SessionStartRecord:
    """The first line: which slot the session uses and the hash of its baseline file. An
    epoch after the first names the session's identity as `origin` (the SHA-256 of epoch 0's
    first line, this record as the session was made): what it is, whatever its id."""

    time: Timestamp
    session: SessionId
    epoch: int
    slot: str
    baseline: str = field(validator=_check_sha256)
    origin: str = field(default="", metadata=_OMIT, validator=_check_origin)
    fork: Fork | None = field(default=None, metadata=_OMIT)  # a fork's source (SPEC section 20)
    what_if: SessionId | None = field(default=None, metadata=_OMIT)  # replayed --with from it
    mode: Mode | None = field(default=None, metadata=_OMIT)  # the mode it opens in (None: auto)


@frozen
class UserRecord:
    """A message of the person's. `origin` names where it came from when its channel said
    (`turn` frame's `origin`): a session runs one turn per origin (left out when none).
    `untrusted`: its words are not the owner's (a schedule made while a conversation held an
    untrusted result): the conversation is tainted from it on. `settings`: on a turn's own
    message (not a soft break's), what the turn ran with; None in a log from before replay.
    `note`: loopd's own words, sent after the message's (a fork's first turn says what the
    fork does not carry); left out when none. `files`: the files the turn carried (SPEC
    section 22), kept beside the log; `attached` the text the model was given of them (each
    text file's, each PDF's and described image's, after the message's words: untrusted, the
    conversation is tainted from it on); its images go as image parts."""

    time: Timestamp
    content: str
    origin: Origin | None = field(default=None, metadata=_OMIT)
    untrusted: bool = field(default=False, metadata=_OMIT)
    settings: TurnSettings | None = field(default=None, metadata=_OMIT)
    note: str = field(default="", metadata=_OMIT)  # loopd's words after the message's
    files: tuple[TurnFile, ...] = field(default=(), metadata=_OMIT)  # attached to the message
    attached: str = field(default="", metadata=_OMIT)  # the files' text, as the model got it


@frozen
class AssistantRecord:
    """A final completion's three fields, exactly as the server returned them."""

    time: Timestamp
    content: str | None
    reasoning_content: str | None
    tool_calls: tuple[ToolCall, ...] | None


@frozen
class UsageRecord:
    """Written right after each `assistant` record."""

    time: Timestamp
    cache_n: int
    prompt_n: int
    predicted_n: int
    reasoning_tokens: int
    thinking_capped: bool
    # "repetition": loopd stopped the stream, the answer repeating itself; the figures are
    # those the stream gave before the stop (the prompt's from its progress, a token a delta).
    stopped: str | None = field(default=None, metadata=_OMIT)
    # What replay needs of the completion besides its text (SPEC section 20): the server cut
    # it at max_tokens (`length`), how exact its cache figure is (`cache_block`, 1 for
    # llama-server, 0 when it gave none), and for a stream loopd stopped, the length of
    # each piece of text it came in (where the stop fell depends on them).
    length: bool = field(default=False, metadata=_OMIT)
    cache_block: int = field(default=1, metadata=_OMIT)
    pieces: tuple[int, ...] = field(default=(), metadata=_OMIT)

    def usage(self) -> Usage:
        return Usage(
            cache_n=self.cache_n,
            prompt_n=self.prompt_n,
            predicted_n=self.predicted_n,
            reasoning_tokens=self.reasoning_tokens,
            thinking_capped=self.thinking_capped,
        )


@frozen
class ToolResultRecord:
    """A call's result as the model got it. When it was cut (`truncated`) and loopd kept the
    whole of it, `whole` is the SHA-256 of that whole text's UTF-8 (in hex; the file is the
    session's `results/<call>.txt`), so the chain covers what `read_result` reads back."""

    time: Timestamp
    call: int
    tool_call_id: str
    content: str
    data_class: DataClass
    untrusted: bool
    truncated: bool
    whole: str | None = field(default=None, metadata=_OMIT)  # compared, never trusted
    kept: tuple[KeptPart, ...] = field(default=(), metadata=_OMIT)  # its attachments
    is_error: bool = field(default=False, metadata=_OMIT)  # the call failed, was denied...


@frozen
class KeptPart:
    """An attachment of a result, kept beside the log as `results/<file>`: its MIME type and
    the SHA-256 (hex) of its bytes, so the chain covers it."""

    file: str
    mime: str
    sha256: str


@frozen
class CallSentRecord:
    """Written before a call goes to brokerd: a call with this record and no result was sent,
    and its outcome is unknown (it is never run again by itself); one without was never
    sent."""

    time: Timestamp
    call: int
    tool_call_id: str


class ApprovedBy(enum.Enum):
    """Who decided a call that asked for the owner's approval."""

    CHANNEL = "channel"  # a channel of the owner's answered
    TIMEOUT = "timeout"  # nobody answered within `[tools] approval_timeout_s`: denied
    NOBODY = "nobody"  # no channel of the turn could ask: denied at once


@frozen
class ApprovalRecord:
    """A call that asked for the owner's approval, and the answer: `asked` is when the
    question was put, `time` when the answer came."""

    time: Timestamp
    call: int
    id: str
    summary: str
    asked: Timestamp
    answer: Answer
    by: ApprovedBy


class LossCause(enum.Enum):
    """Why the server lost a session's prefix (decided by `loopd/cache/outcome.py`):
    `prefix_changed` (this request is not an extension of the one before: a bug of ours or a
    template), `server_restarted` (the server's start identity in `/props` changed),
    `slot_taken` (another session or client used the slot since) or `evicted` (none of those:
    the server's own caches let it go)."""

    PREFIX_CHANGED = "prefix_changed"
    SERVER_RESTARTED = "server_restarted"
    SLOT_TAKEN = "slot_taken"
    EVICTED = "evicted"


@frozen
class CacheLossRecord:
    """The server reused fewer prompt tokens than the previous request had; `cause` says why
    and `detail` what told it (the value that changed, the message and byte that differ)."""

    time: Timestamp
    expected: int
    got: int
    cause: LossCause | None = field(default=None, metadata=_OMIT)
    detail: str | None = field(default=None, metadata=_OMIT)


class Outcome(enum.Enum):
    """How a turn ended: `done` (its answer was given), a limit or failure (the error code the
    channel got), `cancelled` (the channel went away), `interrupted` (loopd stopped in the
    middle; written when loopd starts again, or by the next turn), `break_hard` (a hard break
    stopped it) or `stopped` (a `stop` frame stopped it: a hard break with no message)."""

    DONE = "done"
    TURN_LIMIT = "turn_limit"
    SESSION_FULL = "session_full"
    INFERENCE = "inference"
    INTERNAL = "internal"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    BREAK_HARD = "break_hard"
    STOPPED = "stopped"


class BreakAt(enum.Enum):
    """Where a break met its turn: between two steps (a soft break: its message is taken
    there), or, for a hard break, while a completion was asked for or streamed (nothing of it
    is kept) or while the tool calls of a completion ran (those left without a result are
    closed as not run)."""

    STEP = "step"
    COMPLETION = "completion"
    TOOL = "tool"


@frozen
class BreakRecord:
    """A turn was interrupted here. A soft break is followed by the `user` record of
    its message, and the turn goes on; a hard break by the turn's closing records, its
    `turn_end` saying `break_hard`. Never sent to the model."""

    time: Timestamp
    hard: bool
    at: BreakAt


@frozen
class TurnEndRecord:
    """The last record of a turn: how it ended and its sums (never sent to the model)."""

    time: Timestamp
    outcome: Outcome
    completions: int
    tool_calls: int
    prompt_n: int
    cache_n: int
    predicted_n: int
    ms: int


@frozen
class RecallRecord:
    """Auto-recall (`[memory] auto_recall`): before a turn's first request, loopd asked
    brokerd's `recall` about the user's message (`query`, its words) and what was found passed
    the threshold. Replayed as a `recall` call (`recall-<call>`) and its result, so the model
    reads memory as evidence a tool gave, never as an instruction; written by loopd, never
    produced by the server. `call` is taken from the session's call numbers."""

    time: Timestamp
    call: int
    query: str
    content: str
    data_class: DataClass
    untrusted: bool
    whole: str | None = field(default=None, metadata=_OMIT)  # as a `tool_result`'s (replay)


class WrapUpReason(enum.Enum):
    """Why a fenced turn's tool use was ended and a plain answer asked for: a second tool
    block in the turn that could not be read, a block repeated with the same arguments, or
    more tool iterations than `[loop] tool_iterations`."""

    BAD_BLOCKS = "bad_blocks"
    REPEATED_CALL = "repeated_call"
    TOOL_ITERATIONS = "tool_iterations"


@frozen
class WrapUpRecord:
    """The message loopd sent to ask for a short closing answer without tools, replayed as a
    user message: after a completion was cut at `max_tokens` (`[loop] wrap_up_on_length`;
    no `reason`), or when a fenced turn's tool use was ended (`reason`)."""

    time: Timestamp
    content: str
    reason: WrapUpReason | None = field(default=None, metadata=_OMIT)


LogRecord = (
    SessionStartRecord
    | UserRecord
    | AssistantRecord
    | UsageRecord
    | ToolResultRecord
    | CacheLossRecord
    | TurnEndRecord
    | EpochEndRecord
    | EpochStartRecord
    | SummaryRecord
    | WrapUpRecord
    | BreakRecord
    | CallSentRecord
    | ApprovalRecord
    | RecallRecord
    | ModeRecord
    | UndoRecord
)
