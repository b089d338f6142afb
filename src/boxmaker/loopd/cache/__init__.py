"""llama-server's prompt cache, as loopd keeps it whole: whether it held between two
completions and why not (`outcome`, pure), what loopd sees of each server and slot (`watch`),
slot states saved across server restarts (`saves`), and the cache around one request of a
session (`loss`). llama-server's own answers (`/props`, `/slots`) are parsed in `infer`."""

from .loss import before_request, loss_record
from .outcome import (
    CacheOutcome,
    Hit,
    Loss,
    PrefixChange,
    cache_outcome,
    explain_loss,
    first_difference,
)
from .saves import Saved, SlotCache, prefix_hash
from .watch import FRESH_SECONDS, LossWatch, ServerWatch

__all__ = [
    "FRESH_SECONDS",
    "CacheOutcome",
    "Hit",
    "Loss",
    "LossWatch",
    "PrefixChange",
    "Saved",
    "ServerWatch",
    "SlotCache",
    "before_request",
    "cache_outcome",
    "explain_loss",
    "first_difference",
    "loss_record",
    "prefix_hash",
]
