"""What a turn ran with that its records do not say, kept on its first `user` record so the
turn can be replayed (SPEC section 20; docs/storage.md, What replay reads)."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from ._tools import Mode

__all__ = ["Refusal", "TurnSettings"]

_OMIT = {"omit_if_default": True}  # each left out at its default, as the records' new fields


@frozen
class Refusal:
    """The server's refusal of a turn's message for its size, which made the turn open a new
    epoch and send it again there: the sizes the refusal named (None: it named none) and the
    message's tokens as the server counted them (None: it could not)."""

    prompt: int | None = field(default=None, metadata=_OMIT)
    n_ctx: int | None = field(default=None, metadata=_OMIT)
    tokens: int | None = field(default=None, metadata=_OMIT)


@frozen
class TurnSettings:
    """What a turn ran with that its records do not say, kept on its first `user` record so
    the turn can be replayed (SPEC section 20): the server's context size as loopd read it
    (`/slots`; it decides epochs; None when the server could not say), whether the channel
    asked for thinking and for a new epoch, and the config's turn settings that differ from
    this version's defaults (`[loop]`, `[context]`, `[memory] auto_recall`, `[tools]
    approval_timeout_s`: a changed default is a changed rule, which replay must show), and
    the mode the channel ran this turn in, when it named one (`/plan`'s `read-only`)."""

    n_ctx: int | None = field(default=None, metadata=_OMIT)
    thinking: bool = field(default=True, metadata=_OMIT)
    new_epoch: bool = field(default=False, metadata=_OMIT)
    config: dict[str, dict[str, Any]] = field(factory=dict, metadata=_OMIT)
    refused: Refusal | None = field(default=None, metadata=_OMIT)
    mode: Mode | None = field(default=None, metadata=_OMIT)
