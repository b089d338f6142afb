"""Every name on disk under `<home>`, in one place: nothing else spells a file name, a prefix
or the hidden-name rule. Pure.

```
<home>/loopd.lock                     held by the one loopd serving the home
<home>/run/loop/loop.sock             loopd's socket (`[channel] socket`), beside `loop.sock.lock`
<home>/run/broker/broker.sock         brokerd's socket (`[broker] socket`), beside its lock
<home>/brokerd.lock                   held by the one brokerd serving the home
<home>/broker/grants/<id>.json        the tools the owner allowed for a session's life
<home>/workspace/                     the file tools' folder (`[tools] workspace`)
<home>/run/server.json                the llama-servers' identities last seen (a hint)
<home>/memory/core.md                 the owner's memory, in every new baseline
<home>/memory/notes.jsonl             the notes kept with `remember` (append only, chained)
<home>/memory/index.sqlite            the recall index: derived from the notes and the logs
<home>/schedules.jsonl                the schedules and their firings (append only, chained)
<home>/sessions/<id>/<n>.baseline.json    epoch n's baseline, as sent
<home>/sessions/<id>/<n>.jsonl            epoch n's log (the highest n is current)
<home>/sessions/<id>/index.json           what `bxctl sessions` lists
<home>/sessions/<id>/results/<call>.txt   the whole of a tool result too long to give whole
<home>/sessions/<id>/files/<sha256>       a file a turn carried, or the text taken from one
<home>/uploads/<sha256>                   a file attached for a turn to come (`attach`), with
                                          `<sha256>.text` its PDF's text; cleared as loopd starts
```

A name in `sessions/` that starts with `.` is never a session (no session id does): a creation
under way (`.new-<id>-<random>`), a folder set aside (`.aside-<id>-<random>`) or a removal
under way (`.rm-<id>-<random>`). In a session's folder, hidden names are files being written
(`.<name>.staged-<random>`, `.<name>.<random>` for a replacement), and `<n>.jsonl.torn-<offset>`
keeps what a crash cut short. A file replaced whole anywhere (`store.FileSystem.replace_file`)
is written first as `.<name>.<random>` beside it.

The recall index names each file it reads (a *source*) by its path under the home:
`memory/notes.jsonl`, `sessions/<id>/<n>.jsonl`.

Outside the home, in `[cache] save_dir` (llama-server's `--slot-save-path`), a session's slot
state is `<digest>.bin`, and loopd's note beside it `<digest>.json`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "BROKER_LOCK",
    "INDEX",
    "LOCK",
    "NOTES_SOURCE",
    "SAVE_NOTES",
    "aside_name",
    "baseline_name",
    "broker_folder",
    "broker_socket",
    "core_memory",
    "creating_name",
    "epoch_of",
    "epochs_in",
    "is_creating",
    "is_hidden",
    "is_stale",
    "lock_beside",
    "log_name",
    "log_source",
    "loop_socket",
    "memory_folder",
    "notes_file",
    "partial_name",
    "recall_index",
    "removing_name",
    "result_file",
    "run_folder",
    "save_note",
    "schedules_file",
    "server_state",
    "session_folder",
    "session_grants",
    "session_of_source",
    "session_sources",
    "sessions_folder",
    "slot_save",
    "staged_name",
    "torn_name",
    "turn_file",
    "upload_file",
    "uploads_folder",
    "workspace",
]

LOCK = "loopd.lock"
BROKER_LOCK = "brokerd.lock"
GATEWAY_LOCK = "gatewayd.lock"
INDEX = "index.json"
ORIGINS = "origins.jsonl"  # a session's origin index, beside its logs
_SESSIONS = "sessions"
_MEMORY = "memory"
_NOTES = "notes.jsonl"
NOTES_SOURCE = f"{_MEMORY}/{_NOTES}"  # the notes, as the recall index names them
SAVE_NOTES = "*.json"  # the notes beside the slot saves in `save_dir`, as a glob

_LOG = re.compile(r"(0|[1-9][0-9]{0,8})\.jsonl")
_BASELINE = re.compile(r"([0-9]+)\.baseline\.json")
_STAGED = ".staged-"


def sessions_folder(home: Path) -> Path:
    return home / _SESSIONS


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


_HEX64 = re.compile(r"[0-9a-f]{64}")


def turn_file(folder: Path, sha256: str) -> Path:
    """Where a session keeps a file of a turn, or the text taken from one, by its SHA-256."""
    assert _HEX64.fullmatch(sha256), sha256
    return folder / "files" / sha256


def uploads_folder(home: Path) -> Path:
    """Where loopd keeps the files attached for turns to come."""
    return home / "uploads"


def upload_file(home: Path, sha256: str, suffix: str = "") -> Path:
    """An attached file (`suffix` "") or the text loopd took from it (".text")."""
    assert _HEX64.fullmatch(sha256), sha256
    assert suffix in ("", ".text"), suffix
    return uploads_folder(home) / f"{sha256}{suffix}"


def memory_folder(home: Path) -> Path:
    return home / _MEMORY


def core_memory(home: Path) -> Path:
    return memory_folder(home) / "core.md"


def notes_file(home: Path) -> Path:
    return memory_folder(home) / _NOTES


def schedules_file(home: Path) -> Path:
    return home / "schedules.jsonl"


def recall_index(home: Path) -> Path:
    """The recall index (SQLite; `-wal` and `-shm` beside it while it is open): derived,
    rebuilt from the notes and the logs whenever it is missing, stale or damaged."""
    return memory_folder(home) / "index.sqlite"


def gateway_folder(home: Path) -> Path:
    """gatewayd's state: the sync position, the rooms' sessions, its token."""
    return home / "gateway"


def gateway_run(home: Path) -> Path:
    """gatewayd's run folder: its status file, which `bxctl gateway` reads."""
    return run_folder(home) / "gateway"


def run_folder(home: Path) -> Path:
    """What the daemons keep while they run: their sockets (by default) and `server.json`."""
    return home / "run"


def loop_socket(home: Path) -> Path:
    """loopd's socket unless `[channel] socket` names another."""
    return run_folder(home) / "loop" / "loop.sock"


def broker_socket(home: Path) -> Path:
    """brokerd's socket unless `[broker] socket` names another."""
    return run_folder(home) / "broker" / "broker.sock"


def workspace(home: Path) -> Path:
    """The file tools' folder unless `[tools] workspace` names another."""
    return home / "workspace"


def broker_folder(home: Path) -> Path:
    """brokerd's own state (the sessions' grants)."""
    return home / "broker"


def session_grants(home: Path, session: str) -> Path:
    """Where brokerd keeps the tools the owner allowed for `session`'s life."""
    assert "/" not in session
    assert not session.startswith(".")
    return broker_folder(home) / "grants" / f"{session}.json"


def server_state(home: Path) -> Path:
    return run_folder(home) / "server.json"


def lock_beside(path: Path) -> Path:
    """The lock file that keeps one process on `path` (a socket)."""
    return path.with_name(path.name + ".lock")


def log_name(epoch: int) -> str:
    return f"{epoch}.jsonl"


def baseline_name(epoch: int) -> str:
    return f"{epoch}.baseline.json"


def epoch_of(name: str) -> int | None:
    """The epoch whose log `name` is; None when it is no log's name."""
    match = _LOG.fullmatch(name)
    return None if match is None else int(match[1])


def epochs_in(names: Iterable[str]) -> list[int]:
    """The epochs whose log is among a folder's `names`, in order (the last is current)."""
    return sorted(epoch for name in names if (epoch := epoch_of(name)) is not None)


def session_sources(session: str) -> str:
    """What the recall index's names of a session's logs start with: `sessions/<id>/`."""
    return f"{_SESSIONS}/{session}/"


def log_source(session: str, epoch: int) -> str:
    """An epoch's log as the recall index names it: `sessions/<id>/<n>.jsonl`."""
    return session_sources(session) + log_name(epoch)


def session_of_source(source: str) -> str | None:
    """The name in `sessions/` whose folder holds the source named `source` (a session id,
    unless the index was written otherwise); None when it is no file of a session's folder."""
    parts = source.split("/")
    return parts[1] if len(parts) == 3 and parts[0] == _SESSIONS else None


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
    """A replacement of a file (`index.json`, anywhere) while it is written: `.index.json.9f2c`."""
    return f".{name}.{token}"


def slot_save(save_dir: Path, name: str) -> Path:
    """A session's slot state as llama-server saved it (`name`: a digest of its id)."""
    return save_dir / f"{name}.bin"


def save_note(save_dir: Path, name: str) -> Path:
    """loopd's note beside a slot save (what it is for; `SAVE_NOTES` matches each)."""
    return save_dir / f"{name}.json"


def torn_name(log: str, offset: int, copy: int = 1) -> str:
    """Where the bytes of a write cut short at `offset` of `log` are kept."""
    return f"{log}.torn-{offset}" + (f"-{copy}" if copy > 1 else "")


def is_stale(name: str, current: int) -> bool:
    """Whether a name in a session's folder is what a killed writer left: a staged file, a
    half-written `index.json` or `origins.jsonl`, or a baseline of an epoch past the
    `current` log."""
    if name.startswith(".") and (
        _STAGED in name or name.startswith((f".{INDEX}.", f".{ORIGINS}."))
    ):
        return True
    match = _BASELINE.fullmatch(name)
    return match is not None and int(match[1]) > current
