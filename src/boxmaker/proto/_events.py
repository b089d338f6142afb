"""Events: what the inference client reports while a completion streams (`ChatEvent`), and
what a turn reports to its channel (`TurnEvent`).

The turn loop passes every `ChatEvent` but `ToolCallDelta` on unchanged, so the shared kinds
are one class each and belong to both unions.
"""

from __future__ import annotations

from attrs import field, frozen

from ._records import LossCause, WrapUpReason
from ._tools import Answer, DataClass

__all__ = [
    "ApprovalAnswered",
    "ApprovalNeeded",
    "CacheCold",
    "CacheLoss",
    "ChatEvent",
    "Content",
    "EpochStart",
    "Length",
    "MessageTaken",
    "Progress",
    "Queued",
    "QueuedMessage",
    "Reasoning",
    "Repetition",
    "Retrying",
    "ThinkingCapped",
    "ToolCallDelta",
    "ToolCallStarted",
    "ToolResult",
    "ToolsOff",
    "TurnEvent",
    "Waiting",
]


@frozen
class Queued:
    """The request waits in loopd's own slot gate behind `ahead` others."""

    ahead: int


@frozen
class Waiting:
    """The server's slot `slot_busy` (its `id_slot`) is processing another client's task."""

    slot_busy: int


@frozen
class Progress:
    """Prompt processing: `processed` of `total` tokens, `cache` of them reused."""

    total: int
    cache: int
    processed: int


@frozen
class Reasoning:
    text: str


@frozen
class Content:
    text: str


@frozen
class ToolCallDelta:
    """A piece of tool call `index`: `id` and `name` when the server sent them."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@frozen
class ThinkingCapped:
    tokens: int


@frozen
class Retrying:
    """Attempt number `attempt` starts after `after_ms`; the one before failed with `error`.

    What the channel showed of the failed attempt should be dropped.
    """

    attempt: int
    after_ms: int
    error: str


@frozen
class ToolCallStarted:
    """A call is about to run: its tool, and the call in one short line (`tools.call_summary`;
    left out when empty, so a call without arguments is the bytes it always was)."""

    name: str
    summary: str = field(default="", metadata={"omit_if_default": True})


@frozen
class ToolResult:
    """A call's result reached the model; `is_error`: the call failed, was denied, timed out
    or had arguments its schema refuses (the result's words say which)."""

    name: str
    data_class: DataClass
    truncated: bool
    is_error: bool = field(default=False, metadata={"omit_if_default": True})


@frozen
class ApprovalNeeded:
    """A call waits for the owner's approval: answer `id` with an `approval` frame on a new
    connection to loop.sock (or `bxctl approvals`). `detail` is every argument of the call
    (docs/protocol.md, "The detail of a call"). `only_once`: the answers are `once` and
    `deny` (the session's `ask` mode asked it)."""

    id: str
    tool: str
    summary: str
    detail: str = field(default="", metadata={"omit_if_default": True})
    only_once: bool = field(default=False, metadata={"omit_if_default": True})


@frozen
class ApprovalAnswered:
    """The call waiting as `id` was answered (by this channel or another), or timed out."""

    id: str
    answer: Answer


@frozen
class CacheLoss:
    expected: int
    got: int
    cause: LossCause | None = field(default=None, metadata={"omit_if_default": True})
    detail: str | None = field(default=None, metadata={"omit_if_default": True})


@frozen
class CacheCold:
    """Before a request: the server no longer holds the session's prefix for a reason loopd
    knows (`cause`, told by `detail`), so the whole prompt is processed again. The
    `cache_loss` after its completion is then the same loss, already said."""

    cause: LossCause
    detail: str


@frozen
class EpochStart:
    """A new epoch was opened: its number, the turns it carries whole, and the size of the
    summary of what came before (0: no summary could be made)."""

    epoch: int
    carried_turns: int
    summary_tokens: int


@frozen
class Length:
    """A completion was cut at `max_tokens` after `predicted_n` tokens."""

    predicted_n: int


@frozen
class ToolsOff:
    """A fenced turn's tool use was ended and a plain answer asked for (`reason`: a second tool
    block that could not be read, a repeated block, or too many tool iterations)."""

    reason: WrapUpReason


@frozen
class Repetition:
    """The answer kept repeating `text`: its stream was stopped there, and what came is the
    turn's answer."""

    text: str


@frozen
class QueuedMessage:
    """The message waits in its session's mailbox behind `ahead` others (the turn that holds
    the session counted): it runs, or a soft break is taken, when they are done."""

    ahead: int


@frozen
class MessageTaken:
    """A soft break's message was taken into this turn at a step boundary: its `user` record
    is in the log, and what follows answers it too."""


ChatEvent = (
    Queued | Waiting | Progress | Reasoning | Content | ToolCallDelta | ThinkingCapped | Retrying
)
TurnEvent = (
    Queued
    | Waiting
    | Progress
    | Reasoning
    | Content
    | ToolCallStarted
    | ToolResult
    | ThinkingCapped
    | Retrying
    | CacheCold
    | CacheLoss
    | EpochStart
    | Length
    | ToolsOff
    | Repetition
    | QueuedMessage
    | MessageTaken
    | ApprovalNeeded
    | ApprovalAnswered
)
