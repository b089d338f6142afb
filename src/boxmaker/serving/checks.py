"""The self-test's checks both daemons run before they bind their socket: each `Check` says
what it looked at and, when it fails, what to do (SPEC section 8); `Checks` gathers them;
`own_home` makes the home, checks it is the daemon's user's alone and takes the daemon's lock
in it; `writable` tries a file in a folder."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path

from attrs import define, field, frozen

from ..config import Config, ConfigError, load_config
from ..session import SessionError
from ..store import exposure
from .lock import Locked, PidLock, take_lock

__all__ = ["Check", "Checks", "own_home", "writable"]


@frozen
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


@define
class Checks:
    """The checks so far, and the home's lock once taken: the caller releases it."""

    checks: list[Check] = field(factory=list)
    lock: PidLock | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name, ok, detail))
        return ok

    def report(self, log: logging.Logger) -> None:
        """Each check, a line in the daemon's log: a failed one as an error."""
        for check in self.checks:
            (log.info if check.ok else log.error)("self-test %s", check.line())

    def load(self, config_path: Path, environ: Mapping[str, str] | None = None) -> Config | None:
        """The config, read whole (one schema for both daemons), its check added."""
        try:
            config = load_config(config_path, environ)
        except ConfigError as error:
            self.add("config", False, str(error))
            return None
        self.add("config", True, str(config_path))
        return config


def own_home(home: Path, result: Checks, lock_name: str, who: str) -> bool:
    """Make the home if it is missing, check it is the daemon's user's alone, then take the
    daemon's lock in it (`result.lock`): one loopd, and one brokerd, per home."""
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        return result.add("home", False, f"cannot create {home}: {error.strerror}")
    if (said := exposure(home, follow=True)) is not None:
        return result.add(
            "home", False, f"{home} {said}; {who} uses only a home its user alone can write"
        )
    try:
        result.lock = take_lock(home / lock_name)
    except Locked as error:
        holder = f"pid {error.pid}" if error.pid is not None else "a process"
        return result.add(
            "home",
            False,
            f"another {who} ({holder}) is already serving {home} (it holds {error.path}); stop "
            "it first, or give this one another [paths] home",
        )
    except SessionError as error:  # Exposed: a link, or not ours alone
        return result.add("home", False, str(error))
    except OSError as error:
        return result.add("home", False, f"cannot lock {home / lock_name}: {error.strerror}")
    return True


def writable(folder: Path) -> str | None:
    """Make `folder` if it is missing and write a file in it; what failed, or None."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".selftest-"):
            pass
    except OSError as error:
        return f"cannot write in {folder}: {error.strerror}"
    return None
