"""Where what the conversation holds came from, as one fold over an epoch's records (SPEC
section 17, issue 41). Pure.

`tainted`: an untrusted result is in the conversation — a tool's, what an auto-recall brought
back from one, a summary the epoch opened with that was made from a tainted conversation, a
message whose words are not the owner's (a schedule made under taint), or a message that
carried files (their words are data, never the owner's instructions: SPEC section 22).
While it is, a tool that sends data out, and a write to the notes, are asked for; the model's
answers are untrusted for memory; a summary made now is tainted, and so is the epoch it opens.

`secret`: a secret result is in the conversation, or a summary made from a conversation that
held one. While it is, the model's answers and every later result may repeat it: memory keeps
none of them (nor the epoch's summary, nor a note made then), so no other conversation
recalls it.

Both last the rest of the epoch, and travel into the next through its summaries and the turns
it carries (`epoch_start`'s flags).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..proto import (
    DataClass,
    EpochStartRecord,
    LogRecord,
    RecallRecord,
    SummaryRecord,
    ToolResultRecord,
    UserRecord,
)

__all__ = ["is_secret", "is_tainted", "secret", "tainted"]


def is_tainted(record: LogRecord) -> bool:
    """Whether `record` taints the conversation from it on."""
    if isinstance(record, UserRecord):
        return record.untrusted or bool(record.files)
    if isinstance(record, ToolResultRecord | RecallRecord):
        return record.untrusted
    return isinstance(record, SummaryRecord | EpochStartRecord) and record.tainted


def is_secret(record: LogRecord) -> bool:
    """Whether `record` makes the conversation secret from it on."""
    if isinstance(record, ToolResultRecord | RecallRecord):
        return record.data_class is DataClass.SECRET
    return isinstance(record, SummaryRecord | EpochStartRecord) and record.secret


def tainted(records: Sequence[LogRecord]) -> bool:
    """Whether an untrusted result is in the conversation of an epoch's `records`."""
    return any(map(is_tainted, records))


def secret(records: Sequence[LogRecord]) -> bool:
    """Whether a secret is in the conversation of an epoch's `records`."""
    return any(map(is_secret, records))
