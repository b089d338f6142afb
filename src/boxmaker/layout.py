"""Every name on disk under `<home>`, in one place: nothing else spells a file name, a prefix
or the hidden-name rule. Pure.

```
<home>/loopd.lock                     held by the one loopd serving the home
<home>/run/loop/loop.sock             loopd's socket (`[channel] socket`), beside `loop.sock.lock`
<home>/run/broker/broker.sock         brokerd's socket (`[broker] socket`), beside its lock
<home>/brokerd.lock                   held by the one brokerd serving the home
<home>/broker/grants/<id>.json        the tools the owner allowed for a session's life
<home>/workspace/                     the file tools' folder (`[tools] workspace`)
<home>/run/server.json                the llama-servers' identities last seen
<home>/memory/core.md                 the owner's memory, in every new baseline
<home>/memory/notes.jsonl             the notes kept with `remember` (append only, chained)
<home>/memory/index.sqlite            the recall index: derived from the notes and the logs
<home>/sessions/<id>/<n>.baseline.json    epoch n's baseline, as sent
<home>/sessions/<id>/<n>.jsonl            epoch n's log (the highest n is current)
<home>/sessions/<id>/index.json           what `bxctl sessions` lists
<home>/sessions/<id>/results/<call>.txt   the whole of a tool result too long to give whole
```

A name in `sessions/` that starts with `.` is never a session (no session id does): a creation
under way (`.new-<id>-<random>`), a folder set aside (`.aside-<id>-<random>`) or a removal
under way (`.rm-<id>-<random>`). In a session's folder, hidden names are files being written
(`.<name>.staged-<random>`, `.<name>.<random>` for a replacement), and `<n>.jsonl.torn-<offset>`
keeps what a crash cut short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "BROKER_LOCK",
    "INDEX",
    "LOCK",
    "aside_name",
    "baseline_name",
    "broker_socket",
    "core_memory",
    "creating_name",
    "epochs_in",
    "is_creating",
    "is_hidden",
    "is_stale",
    "lock_beside",
    "log_name",
    "loop_socket",
    "memory_folder",
    "notes_file",
    "partial_name",
    "recall_index",
    "removing_name",
    "result_file",
    "server_state",
    "session_folder",
    "session_grants",
    "sessions_folder",
    "staged_name",
    "torn_name",
    "workspace",
]

LOCK = "loopd.lock"
BROKER_LOCK = "brokerd.lock"
INDEX = "index.json"

_LOG = re.compile(r"(0|[1-9][0-9]{0,8})\.jsonl")
_BASELINE = re.compile(r"([0-9]+)\.baseline\.json")
_STAGED = ".staged-"


def sessions_folder(home: Path) -> Path:
    return home / "sessions"


def session_folder(home: Path, session: str) -> Path:
    """The folder of a session id (which can never name another place: no `/`, no leading
    `.`)."""
    folder = sessions_folder(home) / session
    assert folder.parent == sessions_folder(home)
    return folder


def result_file(folder: Path, call: int) -> Path:
    """Where a session (its `folder`) keeps the whole of call `call`'s result."""
    return folder / "results" / f"{call}.txt"


def part_file(folder: Path, name: str) -> Path:
    """Where a session keeps an attachment of a result (`<call>.<part>.<ext>`)."""
    return folder / "results" / name


def memory_folder(home: Path) -> Path:
    return home / "memory"


def core_memory(home: Path) -> Path:
    return memory_folder(home) / "core.md"


def notes_file(home: Path) -> Path:
    return memory_folder(home) / "notes.jsonl"


def recall_index(home: Path) -> Path:
    """The recall index (SQLite; `-wal` and `-shm` beside it while it is open): derived,
    rebuilt from the notes and the logs whenever it is missing, stale or damaged."""
    return memory_folder(home) / "index.sqlite"


def loop_socket(home: Path) -> Path:
    """loopd's socket unless `[channel] socket` names another."""
    return home / "run" / "loop" / "loop.sock"


def broker_socket(home: Path) -> Path:
    """brokerd's socket unless `[broker] socket` names another."""
    return home / "run" / "broker" / "broker.sock"


def workspace(home: Path) -> Path:
    """The file tools' folder unless `[tools] workspace` names another."""
    return home / "workspace"


def session_grants(home: Path, session: str) -> Path:
    """Where brokerd keeps the tools the owner allowed for `session`'s life."""
    assert "/" not in session
    assert not session.startswith(".")
    return home / "broker" / "grants" / f"{session}.json"


def server_state(home: Path) -> Path:
    return home / "run" / "server.json"


def lock_beside(path: Path) -> Path:
    """The lock file that keeps one process on `path` (a socket)."""
    return path.with_name(path.name + ".lock")


def log_name(epoch: int) -> str:
    return f"{epoch}.jsonl"


def baseline_name(epoch: int) -> str:
    return f"{epoch}.baseline.json"


def epochs_in(names: Iterable[str]) -> list[int]:
    """The epochs whose log is among a folder's `names`, in order (the last is current)."""
    return sorted(int(match[1]) for name in names if (match := _LOG.fullmatch(name)))


def is_hidden(name: str) -> bool:
    """Whether a name in `sessions/` is not a session (a creation, an aside, a removal)."""
    return name.startswith(".")


def creating_name(session: str, token: str) -> str:
    return f".new-{session}-{token}"


def is_creating(name: str) -> bool:
    return name.startswith(".new-")


def aside_name(session: str, token: str) -> str:
    return f".aside-{session}-{token}"


def removing_name(session: str, token: str) -> str:
    return f".rm-{session}-{token}"


def staged_name(name: str, token: str) -> str:
    """A file of a session's folder while it is written: `.1.jsonl.staged-9f2c`."""
    return f".{name}{_STAGED}{token}"


def partial_name(name: str, token: str) -> str:
    """A replacement of a file (`index.json`) while it is written: `.index.json.9f2c`."""
    return f".{name}.{token}"


def torn_name(log: str, offset: int, copy: int = 1) -> str:
    """Where the bytes of a write cut short at `offset` of `log` are kept."""
    return f"{log}.torn-{offset}" + (f"-{copy}" if copy > 1 else "")


def is_stale(name: str, current: int) -> bool:
    """Whether a name in a session's folder is what a killed writer left: a staged file, a
    half-written `index.json`, or a baseline of an epoch past the `current` log."""
    if name.startswith(".") and (_STAGED in name or name.startswith(f".{INDEX}.")):
        return True
    match = _BASELINE.fullmatch(name)
    return match is not None and int(match[1]) > current
