"""`<home>/schedules.jsonl`: the schedules and what became of their due times, one record a
line, append only and hash-chained (`store.ChainedFile`; line 1's `prev` is `GENESIS`).
Three processes write it, each append under the file's lock: bxctl (`bxctl schedule`),
brokerd (the model's `schedule`, `cancel_schedule`) and loopd (`fired`, and a pause it makes).
Blocking calls.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .. import layout
from ..proto import SchedulesRecord
from ..session import SessionError
from ..store import Chain, ChainedFile, FileSystem

__all__ = ["GENESIS", "SCHEDULES", "SchedulesDamaged", "schedules_file"]

GENESIS = hashlib.sha256(b"boxmaker schedules").hexdigest()  # what line 1 of the chain follows


class SchedulesDamaged(SessionError):
    """A line of schedules.jsonl is not a whole, chained schedule record."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        self.path, self.line, self.reason = path, line, reason
        super().__init__(
            f"{path}, line {line}: {reason}; no schedule fires, and none is made or changed, "
            "until the file is mended (bxctl verify says the same)"
        )


SCHEDULES: Chain[SchedulesRecord] = Chain(
    SchedulesRecord,  # type: ignore[arg-type]
    "schedule",
    GENESIS,
    SchedulesDamaged,
)


def schedules_file(home: Path, fs: FileSystem | None = None) -> ChainedFile[SchedulesRecord]:
    """The schedules of one home."""
    return ChainedFile(layout.schedules_file(home), SCHEDULES, fs)
