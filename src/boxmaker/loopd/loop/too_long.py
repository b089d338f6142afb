"""A message that cannot fit: the first request of a turn refused for its size.

The user message is durable before its request goes out (SPEC section 5), so the turn's user
record is in the log when the server refuses it. The turn then cuts the log back to where it
was before that record (truncate, fsync: the turn leaves nothing, not even a `turn_end`) and
`after_refusal()` decides what comes next: a new epoch and one more try when the conversation
*before* the message is itself past `[context] epoch_at` (this also closes the window where a
crash between the refusal and the cut leaves the message in the log: the next refusal finds
the conversation full and opens an epoch), else `session_full` naming the sizes. The message's
size is asked of the server's tokenizer, on this path only.
"""

from __future__ import annotations

from ...proto import Refusal
from ...session import has_own_turn
from ...store import OpenSession
from ..infer import InferError, context_sizes
from .errors import SessionFull
from .runtime import Runtime

__all__ = ["after_refusal", "too_long"]


async def after_refusal(
    session: OpenSession, runtime: Runtime, full: SessionFull, content: str, *, may_open: bool
) -> tuple[str, Refusal]:
    """The reason to open a new epoch and send the message again, when `may_open`, the
    conversation before it is past `epoch_at`, and the epoch has a turn of its own to leave
    behind (a young epoch, or one that only carries turns, would open its successor with
    nothing gained); the session's user record must be cut back. With it, what the server
    said of the refusal, which the message sent again keeps (replay).

    Raises:
        SessionFull: naming the message's tokens and the room the context has left.
    """
    sizes = context_sizes(full.error) if full.error is not None else None
    n_ctx = sizes[1] if sizes else await runtime.client_of(session.slot).context_size(session.slot)
    try:
        tokens: int | None = await runtime.client_of(session.slot).tokenize(content)
    except InferError:
        tokens = None
    before: int | None = None
    if sizes is not None and tokens is not None:
        before = max(sizes[0] - tokens, 0)  # the prompt without the message's own tokens
    elif (usage := session.last_usage()) is not None:
        before = usage.cache_n + usage.prompt_n + usage.predicted_n  # loopd's own count
    epoch_at = runtime.config.context.epoch_at
    young = not has_own_turn(session.records, session.state.head)
    if may_open and not young and n_ctx and before is not None and before >= epoch_at * n_ctx:
        reason = (
            f"the conversation before the message is {before:,} tokens of the context's "
            f"{n_ctx:,} ([context] epoch_at = {epoch_at:g})"
        )
        prompt, named = sizes if sizes is not None else (None, None)
        return reason, Refusal(prompt, named, tokens)
    raise SessionFull(too_long(tokens, before, n_ctx), full.error)


def too_long(tokens: int | None, before: int | None, n_ctx: int | None) -> str:
    """What a person reads when their message does not fit."""
    what = f"the message is {tokens:,} tokens" if tokens is not None else "the message"
    if n_ctx and before is not None:
        room = max(n_ctx - before, 0)
        where = (
            f"the server's context holds {n_ctx:,} tokens and the conversation before it "
            f"takes {before:,}, which leaves {room:,}"
        )
    else:
        where = "it does not fit the server's context"
    return f"{what} and cannot fit: {where}; it was not kept. Send it shorter, or in parts."
