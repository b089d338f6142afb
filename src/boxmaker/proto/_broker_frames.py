"""Frames on `broker.sock`, loopd's (and bxctl's) requests to brokerd: one request frame a
connection, answered by one final frame (`response`, `tools`, `noted`, an undo's, or an
`error`). Each is written as `loop.sock`'s are (`_frames.py`)."""

from __future__ import annotations

from attrs import field, frozen

from ._chat import ToolSchema
from ._frames import OMIT_DEFAULT, WireError
from ._ids import SessionId, Timestamp
from ._tools import Answer, DataClass, ToolRequest, ToolResponse
from ._undo import UndoFrame, UndoneFrame, UndoPreviewFrame

__all__ = [
    "ApproveFrame",
    "BrokerFrame",
    "CallFrame",
    "ListToolsFrame",
    "ListedRoot",
    "ListedServer",
    "ListedTool",
    "NotedFrame",
    "RecallFrame",
    "ResponseFrame",
    "SessionChangedFrame",
    "SessionRemovedFrame",
    "ToolsFrame",
]


@frozen
class ListToolsFrame:
    """To brokerd: every tool it holds, with its definition's hash and its grant."""


@frozen
class ListedTool:
    """A tool as brokerd lists it: `core` ones may be in a baseline (by the config), the rest
    are found with `find_tool`; `grant` and `source` say what the policy decides for it and
    where that came from."""

    schema: ToolSchema
    definition: str
    core: bool
    grant: str
    source: str


@frozen
class ListedRoot:
    """A folder the file tools may reach (the workspace first), as the policy grants it."""

    name: str
    path: str
    read: bool
    write: bool
    data_class: DataClass
    checkpoints: str = field(default="", metadata=OMIT_DEFAULT)  # "" or why it has none


@frozen
class ListedServer:
    """An MCP server as brokerd keeps it: `state` is starting, ready or down; `reason` says
    why it is down, or where it runs; `stderr` its last lines."""

    name: str
    state: str
    reason: str
    tools: int
    restarts: int
    stderr: tuple[str, ...] = ()
    listed: Timestamp | None = None  # when it last gave its list (None: not yet)


@frozen
class ToolsFrame:
    tools: tuple[ListedTool, ...]
    roots: tuple[ListedRoot, ...] = ()
    servers: tuple[ListedServer, ...] = field(default=(), metadata={"omit_if_default": True})


@frozen
class CallFrame:
    """To brokerd: run one call."""

    request: ToolRequest


@frozen
class ApproveFrame:
    """To brokerd: the owner's answer to the call waiting as `id` (of `session`)."""

    session: SessionId
    id: str
    answer: Answer


@frozen
class ResponseFrame:
    """brokerd's answer to a call (or to an approval: the call's own answer)."""

    response: ToolResponse


@frozen
class RecallFrame:
    """To brokerd: auto-recall (`[memory] auto_recall`) for a turn of `session` about to ask
    for its first completion: what memory holds of `query` (the words of its user message),
    answered only with what passes the threshold, within `[memory] recall_tokens` (an empty
    result: nothing did). `turn` and `first_turn` as in a `ToolRequest`."""

    session: SessionId
    query: str
    turn: int
    first_turn: int


@frozen
class SessionChangedFrame:
    """To brokerd: `session`'s log has grown (a turn ended, or an epoch opened); its recall
    index is brought up to date in the background. Answered `noted` at once."""

    session: SessionId


@frozen
class SessionRemovedFrame:
    """To brokerd: `session` was removed (`bxctl rm`): what brokerd kept for it ends, its
    grants and its interpreter, when it is this `identity`'s (a session made again under the
    id meanwhile keeps its own; "": whatever it is). Answered `noted`."""

    session: SessionId
    identity: str = field(default="", metadata=OMIT_DEFAULT)


@frozen
class NotedFrame:
    """brokerd's answer to `session_changed` and `session_removed`."""


BrokerFrame = (
    ListToolsFrame
    | ToolsFrame
    | CallFrame
    | ApproveFrame
    | ResponseFrame
    | WireError
    | RecallFrame
    | SessionChangedFrame
    | SessionRemovedFrame
    | NotedFrame
    | UndoFrame
    | UndoPreviewFrame
    | UndoneFrame
)
