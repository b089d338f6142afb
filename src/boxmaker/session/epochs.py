"""Epochs: a conversation that outlives the server's context, in parts. Pure.

Each epoch of a session has its own baseline and log (`layout.py` names the files); the current
epoch is the highest with a log, and only its two files are ever read to resume. Each log has
its own hash chain from its own baseline. An epoch after the first opens with:

    session_start {epoch: n, baseline: sha256 of its baseline file}
    epoch_start {epoch: n, created, turns, done, first, calls, carried_turns}
    summary {content, reply, level, first, last}    one per summary of earlier epochs
                                     (`history.py`: history at decreasing resolution)
    the newest `carried_turns` turns of epoch n - 1, copied whole, record for record

and then goes on with its own turns (`log.Header.own_from`). A closed epoch ends with `epoch_end`:
the decision to open the next, holding the summary and how many turns it carries. `opening()`
makes the next epoch's first records from the closed epoch's records alone, so a switch
interrupted by a crash after its `epoch_end` is finished from the disk without asking the
model again.

When to switch and what to carry is decided here too. Sizes are in tokens, estimated from
bytes: between the epoch's first and last completions the server counted so many tokens for so
many bytes of messages (`tokens_per_byte`), and that ratio sizes each turn. An estimate, not a
count: it decides how many turns fill about `carry_fraction` of the context, where a few per
cent either way do no harm, and it costs no round trip to the server. The summary request is
the epoch's messages up to the first carried turn, then `SUMMARY_INSTRUCTION`: a prefix of what
the server's slot holds, so it reuses the cache, and it fits even when the whole epoch no
longer does. If the server refuses it anyway, `trimmed()` keeps what fits of it, newest turns
first. With `[tiers] summary`, the same request goes to that server instead, a conversation of
its own, when its context holds it (`tier_holds`, on the same estimate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..proto import (
    Baseline,
    ChatMessage,
    EpochEndRecord,
    EpochStartRecord,
    LogRecord,
    Mode,
    Outcome,
    SessionStartRecord,
    SystemMessage,
    Timestamp,
    TurnEndRecord,
    UsageRecord,
    UserMessage,
    UserRecord,
    encode,
    encode_messages,
    unstructure,
)
from .acts import mode_of
from .history import SUMMARY_INSTRUCTION, decided_parts, opening_summaries
from .index import Index
from .log import Header, header
from .provenance import secret, tainted
from .replay import messages, next_call, starts_turn

__all__ = [
    "DEFAULT_TOKENS_PER_BYTE",
    "carry_count",
    "has_own_turn",
    "open_reason",
    "opening",
    "summary_cap",
    "summary_messages",
    "tail_turns",
    "tier_holds",
    "tokens_per_byte",
    "trimmed",
]

T = TypeVar("T")

DEFAULT_TOKENS_PER_BYTE = 0.3  # English text is about 4 bytes a token; JSON is denser
RATIO_WINDOW = 64  # completions the ratio is measured over, the newest


def tail_turns(records: Sequence[LogRecord], end: int) -> list[int]:
    """Where the whole turns that end `records[:end]` start (each a `user` record through its
    `turn_end`, a soft break's message inside it), oldest first: the turns an epoch switch may
    carry."""
    starts: list[int] = []
    at = end - 1
    while at > 0 and type(records[at]) is TurnEndRecord:
        begin = at - 1
        while begin > 0 and not (
            type(records[begin]) is UserRecord and starts_turn(records, begin)
        ):
            if type(records[begin]) is TurnEndRecord:
                return starts[::-1]  # a turn_end without a user record before it
            begin -= 1
        if begin <= 0:
            break
        starts.append(begin)
        at = begin - 1
    return starts[::-1]


def _carried_mode(records: Sequence[LogRecord]) -> Mode | None:
    """The mode the next epoch opens in (None: auto, as a session with none)."""
    mode = mode_of(records)
    return None if mode is Mode.AUTO else mode


def opening(
    records: Sequence[LogRecord], index: Index, now: Timestamp, baseline: str, identity: str
) -> list[LogRecord]:
    """The first records of the epoch after the one whose records (ending with its
    `epoch_end`) are given; `index` is that epoch's index, `baseline` the sha256 of the new
    epoch's baseline file and `identity` the session's (its `origin`)."""
    end = records[-1]
    start = records[0]
    assert isinstance(end, EpochEndRecord)
    assert isinstance(start, SessionStartRecord)
    starts = tail_turns(records, len(records) - 1)
    carried_turns = min(end.carried_turns, len(starts))
    carried = list(records[starts[-carried_turns] : -1]) if carried_turns else []
    done = sum(type(r) is TurnEndRecord and r.outcome is Outcome.DONE for r in carried)
    epoch = end.epoch + 1
    opened: list[LogRecord] = [
        SessionStartRecord(
            time=now,
            session=start.session,
            epoch=epoch,
            slot=start.slot,
            baseline=baseline,
            origin=identity,
            fork=start.fork,  # a fork stays one (SPEC section 20), as a what-if does
            what_if=start.what_if,
            mode=_carried_mode(records),
        ),
        EpochStartRecord(
            time=now,
            epoch=epoch,
            created=index.created,
            turns=index.turns - carried_turns,
            done=index.done - done,
            first=index.first,
            calls=next_call(records) - 1,
            carried_turns=carried_turns,
            tainted=bool(carried) and (end.tainted or tainted(records)),
            secret=bool(carried) and (end.secret or secret(records)),
        ),
    ]
    decided = decided_parts(records, header(records))
    return opened + opening_summaries(decided, now) + carried


# --- when to switch, and what the next epoch carries ----------------------------------------


def has_own_turn(records: Sequence[LogRecord], head: Header) -> bool:
    """Whether the epoch has a turn of its own (not only the turns it carried): an epoch
    without one is never closed, so a new epoch never closes itself at once."""
    return _last(records, head.own_from, TurnEndRecord) is not None


def open_reason(
    records: Sequence[LogRecord], head: Header, n_ctx: int | None, epoch_at: float
) -> str | None:
    """Why the next turn must open a new epoch first, or None: the epoch's last turn was
    refused for its size part-way (`session_full` after tool results), or the conversation
    its last completion saw is past `epoch_at` of the context. Only an epoch with a turn of
    its own is closed this way, so a new epoch never closes itself at once."""
    end = _last(records, head.own_from, TurnEndRecord)
    if end is None:
        return None
    if end.outcome is Outcome.SESSION_FULL:
        return "the last turn no longer fitted the server's context"
    usage = _last(records, head.own_from, UsageRecord)
    if usage is None or not n_ctx:
        return None
    total = usage.cache_n + usage.prompt_n + usage.predicted_n
    if total < epoch_at * n_ctx:
        return None
    return (
        f"the conversation is {total:,} tokens of the context's {n_ctx:,} "
        f"([context] epoch_at = {epoch_at:g})"
    )


def _last(records: Sequence[LogRecord], begin: int, kind: type[T]) -> T | None:
    """The last record of type `kind` from `begin` on (looked for from the end)."""
    for at in range(len(records) - 1, begin - 1, -1):
        record = records[at]
        if type(record) is kind:
            return record
    return None


def tokens_per_byte(baseline: Baseline, records: Sequence[LogRecord], own_from: int) -> float:
    """Tokens per byte of the epoch's conversation. Between its first and its last own
    completion (of its newest `RATIO_WINDOW`, so the cost does not grow with the epoch): the
    tokens the last saw (prompt and answer) less the first one's prompt, for the bytes of the
    messages between; that leaves out the system message and the tools,
    which a template may render in any way (SmolLM2's renders no tools at all). With one own
    completion, its tokens for the bytes of the system message and its messages, the tools
    left out (an overestimate when the template renders them: the safe side, fewer turns
    carried); `DEFAULT_TOKENS_PER_BYTE` with none."""
    usages = [at for at in range(own_from, len(records)) if type(records[at]) is UsageRecord]
    usages = usages[-RATIO_WINDOW:]  # the newest completions: they are what is carried
    if not usages:
        return DEFAULT_TOKENS_PER_BYTE
    last = records[usages[-1]]
    assert isinstance(last, UsageRecord)
    tokens = last.cache_n + last.prompt_n + last.predicted_n
    if len(usages) > 1:
        first = records[usages[0]]
        assert isinstance(first, UsageRecord)
        tokens -= first.cache_n + first.prompt_n
        # From the first completion's answer on: what its prompt did not hold.
        said: Sequence[ChatMessage] = messages(baseline, records[usages[0] - 1 : usages[-1]])
    else:
        said = (SystemMessage(content=baseline.system), *messages(baseline, records[: usages[0]]))
    size = len(encode_messages(said))
    return tokens / size if tokens > 0 and size else DEFAULT_TOKENS_PER_BYTE


def _size(baseline: Baseline, said: Sequence[ChatMessage]) -> int:
    """The bytes of a request's messages (the system message included) and tools."""
    system = SystemMessage(content=baseline.system)
    return len(encode_messages((system, *said))) + len(encode(unstructure(baseline.tools)))


def carry_count(
    baseline: Baseline, records: Sequence[LogRecord], budget: float, ratio: float
) -> int:
    """How many of the newest whole turns fit in `budget` tokens together (at `ratio` tokens
    a byte): the turns are carried whole or not at all, newest first, with no gap."""
    starts = tail_turns(records, len(records))
    ends = [*starts[1:], len(records)] if starts else []  # a young epoch may have no turn
    used = 0.0
    count = 0
    for begin, end in zip(reversed(starts), reversed(ends), strict=True):
        used += ratio * len(encode_messages(messages(baseline, records[begin:end])))
        if used > budget:
            break
        count += 1
    return count


def summary_cap(summary_max_tokens: int, n_ctx: int | None) -> int:
    """The summary's token cap: `[context] summary_max_tokens`, at most an eighth of the
    context."""
    return min(summary_max_tokens, n_ctx // 8) if n_ctx else summary_max_tokens


def tier_holds(tokens: float, cap: int, n_ctx: int | None) -> bool:
    """Whether a server of context `n_ctx` holds a summary request of about `tokens` prompt
    tokens and the `cap` its answer may take: only then is the `summary` tier asked (else the
    session's own server is). A context the server did not say holds nothing."""
    return n_ctx is not None and tokens + cap <= n_ctx


def _carried_from(records: Sequence[LogRecord], carried: int) -> int:
    starts = tail_turns(records, len(records))
    return starts[-carried] if carried else len(records)


def summary_messages(
    baseline: Baseline,
    records: Sequence[LogRecord],
    carried: int,
    said: Sequence[ChatMessage] | None = None,
) -> tuple[ChatMessage, ...]:
    """The summary request's messages: the system message and the epoch's messages up to its
    first carried turn (a prefix of what the server's slot holds), then the instruction.
    `said`, the epoch's messages as the session keeps them (the system message first), spares
    making them again from the records: only the carried turns' are counted."""
    start = _carried_from(records, carried)
    if said is None:
        said = (SystemMessage(content=baseline.system), *messages(baseline, records[:start]))
    else:
        said = said[: len(said) - len(messages(baseline, records[start:]))]
    return (*said, UserMessage(SUMMARY_INSTRUCTION))


def trimmed(
    baseline: Baseline, records: Sequence[LogRecord], carried: int, budget: int
) -> tuple[ChatMessage, ...]:
    """The summary request cut down to about `budget` bytes of messages: what the epoch
    opened with (an earlier summary) if it fits, then its turns newest first, each whole or
    left out. No longer a prefix of the slot, so the server reads it all: the way out when
    the prefix was refused."""
    end = _carried_from(records, carried)
    cuts = [at for at in range(end) if type(records[at]) is UserRecord and starts_turn(records, at)]
    parts = [records[a:b] for a, b in zip([0, *cuts], [*cuts, end], strict=True)]
    sizes = [len(encode_messages(messages(baseline, part))) for part in parts]
    left = budget - _size(baseline, (UserMessage(SUMMARY_INSTRUCTION),))
    kept: set[int] = set()
    for number in [0, *range(len(parts) - 1, 0, -1)]:
        if sizes[number] <= left:
            kept.add(number)
            left -= sizes[number]
    said = [m for number in sorted(kept) for m in messages(baseline, parts[number])]
    return (SystemMessage(content=baseline.system), *said, UserMessage(SUMMARY_INSTRUCTION))
