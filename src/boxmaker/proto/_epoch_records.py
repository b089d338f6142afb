"""The records of an epoch's ending and the next one's opening: the summaries a new epoch
opens with, and where they came from (SPEC section 9). Part of the log's records."""

from __future__ import annotations

from attrs import field, frozen

from ._ids import Timestamp

__all__ = ["EpochEndRecord", "EpochStartRecord", "SummaryPart", "SummaryRecord"]

_OMIT = {"omit_if_default": True}


@frozen
class SummaryPart:
    """One summary a new epoch opens with, as its `epoch_end` decided it: its `level` (1: the
    model's summary of one epoch's own turns; n + 1: made from summaries of level n), the
    epochs it covers (`first` to `last`), and its text; `tainted` when it was made from a
    conversation that held an untrusted result (it may carry words planted for the model),
    `secret` when from one that held a secret (it may repeat it)."""

    level: int
    first: int
    last: int
    text: str
    tainted: bool = field(default=False, metadata=_OMIT)
    secret: bool = field(default=False, metadata=_OMIT)


@frozen
class EpochEndRecord:
    """The last record of a closed epoch, and the decision to open the next: the summary the
    model made of it (`None` when it could not make one; level 1, of this epoch's own turns),
    that completion's figures, how many of its newest turns the next epoch carries whole, and
    the earlier summaries the next epoch opens with before this one (`history`, oldest
    first: those this epoch opened with, some merged into one of a level above). A switch
    interrupted after this record is finished from it, without asking the model again."""

    time: Timestamp
    epoch: int
    summary: str | None
    summary_tokens: int
    cache_n: int
    prompt_n: int
    carried_turns: int
    history: tuple[SummaryPart, ...] = field(default=(), metadata=_OMIT)
    tainted: bool = field(default=False, metadata=_OMIT)  # its summary's provenance
    secret: bool = field(default=False, metadata=_OMIT)
    # Each merge of summaries the switch made, the model's text, in order (replay answers
    # them: a summary merged again into one above is not in `history`).
    merges: tuple[str, ...] = field(default=(), metadata=_OMIT)


@frozen
class EpochStartRecord:
    """The second line of every epoch after the first: its number, and what the session was
    before it, so an epoch's log alone gives the session's figures: when it was created, the
    turns (and answered turns) of the epochs before that this one does not carry, and the
    first words of its first message, and the highest tool-call number so far (`calls`: the
    numbers go on increasing across epochs). The `carried_turns` turns that follow the summary
    are copies of the previous epoch's newest turns; `tainted` and `secret` say they come from
    a conversation that held an untrusted or a secret result (their answers may repeat it,
    though the result itself is not among them)."""

    time: Timestamp
    epoch: int
    created: Timestamp
    turns: int
    done: int
    first: str
    calls: int
    carried_turns: int
    tainted: bool = field(default=False, metadata=_OMIT)
    secret: bool = field(default=False, metadata=_OMIT)


@frozen
class SummaryRecord:
    """A summary an epoch starts its conversation with: a user message (`content`: a fixed
    preface and the summary) and the assistant's fixed acknowledgement (`reply`), so the roles
    alternate as every chat template expects. An epoch opens with one per summary it carries,
    each with its `level` and the epochs it covers (`first` to `last`); a summary written
    before levels has neither, and covers every epoch before its own."""

    time: Timestamp
    content: str
    reply: str
    level: int = field(default=1, metadata=_OMIT)
    first: int | None = field(default=None, metadata=_OMIT)
    last: int | None = field(default=None, metadata=_OMIT)
    tainted: bool = field(default=False, metadata=_OMIT)  # as its `SummaryPart`
    secret: bool = field(default=False, metadata=_OMIT)
