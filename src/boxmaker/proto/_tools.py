"""The tool port's values: a request to run a tool, the four ways a port can answer, and the
owner's answer to a call that asked for approval."""

from __future__ import annotations

import enum

from attrs import field, frozen

from ._ids import SessionId

_OMIT = {"omit_if_default": True}

__all__ = [
    "Answer",
    "Attachment",
    "DataClass",
    "DeniedResponse",
    "FailedResponse",
    "Mode",
    "PendingApprovalResponse",
    "ResultResponse",
    "ToolRequest",
    "ToolResponse",
]


class DataClass(enum.Enum):
    """How sensitive a tool result is: loopd's own words are `public`; a file's class is its
    root's, from the policy."""

    PUBLIC = "public"
    PRIVATE = "private"
    SECRET = "secret"


class Mode(enum.Enum):
    """How far a session's calls may go without the owner (SPEC section 21): `read-only`
    denies every call that may write or run, `ask` asks for each of them whatever its grant,
    `auto` leaves the policy to decide. Decided in brokerd, after the policy's verdict."""

    READ_ONLY = "read-only"
    ASK = "ask"
    AUTO = "auto"


@frozen
class ToolRequest:
    """One call to a port tool; `call` counts per session, `arguments` is JSON text.
    `definition` is the hash of the tool's schema as the session's baseline holds it (None
    for a tool reached through `call_tool`): brokerd runs the call only while its own
    definition of the tool has that hash. `tainted`: an untrusted result is in the session's
    conversation (its epoch), so a tool that sends data out is asked for whatever its grant.
    `turn` is the number of the session's turn that makes the call (from 1, across epochs)
    and `first_turn` the first turn its conversation still holds whole: what a note was made
    in, and what `recall` need not find again. `secret`: a secret is in the conversation (a
    note made now is secret: never recalled, nor pinned). `identity` is the session's (the
    SHA-256 of its first line): brokerd keeps what it holds for a session (its grants, its
    interpreter) for that identity alone, so a new session under a removed one's id gets none
    of it. `mode` is the session's (or its turn's) mode, which brokerd applies after the
    policy's verdict."""

    session: SessionId
    call: int
    tool: str
    arguments: str
    definition: str | None = field(default=None, metadata=_OMIT)
    tainted: bool = field(default=False, metadata=_OMIT)
    turn: int | None = field(default=None, metadata=_OMIT)
    first_turn: int | None = field(default=None, metadata=_OMIT)
    secret: bool = field(default=False, metadata=_OMIT)  # a secret is in the conversation
    identity: str = field(default="", metadata=_OMIT)  # what the session is: `OpenSession`'s
    mode: Mode = field(default=Mode.AUTO, metadata=_OMIT)


@frozen
class Attachment:
    """What a result carries beside its text for the session to keep (an MCP tool's image,
    audio or binary resource): its MIME type and its bytes in base64. The model is shown only
    a line of `content` naming it."""

    mime: str
    data: str


@frozen
class ResultResponse:
    """The call ran; `is_error`: it ran and failed (a cell's exception, an MCP tool's
    `isError`), which the result's words say too."""

    content: str
    data_class: DataClass
    untrusted: bool
    truncated: bool
    attachments: tuple[Attachment, ...] = field(default=(), metadata=_OMIT)
    is_error: bool = field(default=False, metadata=_OMIT)


@frozen
class FailedResponse:
    """The call failed; `untrusted` when the message carries what a tool's server said (an
    MCP server's error, its stderr): the model is told it as an untrusted result."""

    message: str
    untrusted: bool = field(default=False, metadata=_OMIT)


@frozen
class DeniedResponse:
    reason: str


@frozen
class PendingApprovalResponse:
    """The call waits for the owner: `id` names it to the answer, `summary` is one line of what
    it would do (the tool, and its path or command), `detail` every argument of it, bounded
    (docs/protocol.md, "The detail of a call"). `only_once`: the session's `ask` mode asked
    it, so `once` and `deny` are the answers (a `session` or `always` runs it once)."""

    id: str
    summary: str
    detail: str = field(default="", metadata=_OMIT)
    only_once: bool = field(default=False, metadata=_OMIT)


class Answer(enum.Enum):
    """The owner's answer to a call waiting for approval."""

    ONCE = "once"  # run this call
    SESSION = "session"  # run it, and every call of this tool in this session
    ALWAYS = "always"  # run it, and allow the tool in the policy from now on
    DENY = "deny"  # refuse it


ToolResponse = ResultResponse | FailedResponse | DeniedResponse | PendingApprovalResponse
