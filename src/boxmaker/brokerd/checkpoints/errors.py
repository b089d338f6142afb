"""The checkpoints' errors: what stops a snapshot, a restore or a read of the record, each
saying which path, blob or line and why.

    CheckpointError     a root is not the folder it was granted as, a blob's bytes are not
     │                  the ones it was stored as, a line of `log.jsonl` is damaged, a plan
     │                  with conflicts is not forced, a file system error
     └── RestoreStopped a restore stopped part way (a link or a file where a folder was, a
                        folder gone, ...): `restored` lists the paths put back before it

Raised by the blocking modules (`snapshot`, `objects`, `book`, `restore`) and by `decode`;
brokerd's service answers it in words, never letting it end the daemon.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CheckpointError", "RestoreStopped"]


class CheckpointError(Exception):
    """A checkpoint cannot be taken, kept or restored; `str(error)` says which and why."""


class RestoreStopped(CheckpointError):
    """A restore stopped part way; `str(error)` says where and why, `restored` lists the
    paths it had put back (in order), which an undo record names."""

    def __init__(self, message: str, restored: Sequence[str]) -> None:
        super().__init__(message)
        self.restored = list(restored)
