"""A real Synapse homeserver on loopback, for the gateway tier (`make verify-gateway`), the
device tier's gateway test and `make bench`'s gateway row.

`Synapse(folder)` writes a homeserver config into `folder` (SQLite, one client listener on
127.0.0.1 at a free port, no federation, registration by shared secret only, every rate limit
lifted so tests never wait on one, cheap password hashes) and runs Synapse from its own virtual
environment (`make synapse`). Its log, at WARNING, is `folder/homeserver.log`; anything it
prints before its logging starts is in `folder/synapse.out`. Both are quoted when it fails to
start or stop.

It is synchronous (a subprocess and `httpx.Client`): fixtures start it once per session.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from bxdev.llama import free_port

__all__ = ["RATE_LIMITS", "Synapse", "SynapseError", "synapse_python"]

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 10.0

UNLIMITED = {"per_second": 100_000, "burst_count": 1_000_000}
# Synapse 1.163's rate limiters (synapse/config/ratelimiting.py), each lifted.
RATE_LIMITS: dict[str, Any] = {
    "rc_message": UNLIMITED,
    "rc_registration": UNLIMITED,
    "rc_registration_token_validity": UNLIMITED,
    "rc_login": {"address": UNLIMITED, "account": UNLIMITED, "failed_attempts": UNLIMITED},
    "rc_admin_redaction": UNLIMITED,
    "rc_joins": {"local": UNLIMITED, "remote": UNLIMITED},
    "rc_joins_per_room": UNLIMITED,
    "rc_key_requests": UNLIMITED,
    "rc_3pid_validation": UNLIMITED,
    "rc_invites": {"per_room": UNLIMITED, "per_user": UNLIMITED, "per_issuer": UNLIMITED},
    "rc_third_party_invite": UNLIMITED,
    "rc_media_create": UNLIMITED,
    "rc_presence": {"per_user": UNLIMITED},
    "rc_delayed_event_mgmt": UNLIMITED,
    "rc_room_creation": UNLIMITED,
    "rc_reports": UNLIMITED,
    "rc_user_directory": UNLIMITED,
    "rc_profile": UNLIMITED,
}


class SynapseError(RuntimeError):
    """Synapse did not start, stop or answer as expected; the message quotes its log."""


def synapse_python() -> Path:
    """The Python of Synapse's own venv: `$BOXMAKER_SYNAPSE_PYTHON`, else `make synapse`'s."""
    override = os.environ.get("BOXMAKER_SYNAPSE_PYTHON")
    return Path(override) if override else REPO / ".venv/synapse/bin/python"


class Synapse:
    """One homeserver in `folder`, on the same port and data across restarts."""

    def __init__(
        self, folder: Path, *, python: Path | None = None, server_name: str = "localhost"
    ) -> None:
        self.folder = folder
        self.python = python or synapse_python()
        self.server_name = server_name
        self.port = free_port()
        self.config_path = folder / "homeserver.yaml"
        self.log_path = folder / "homeserver.log"
        self.out_path = folder / "synapse.out"
        self._secret = secrets.token_hex(32)
        self._process: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)
        self._write_config()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _write_config(self) -> None:
        """homeserver.yaml and its log config, as JSON (which is YAML), and the signing key."""
        log_config = {
            "version": 1,
            "formatters": {
                "precise": {"format": "%(asctime)s %(levelname)s %(name)s %(request)s %(message)s"}
            },
            "handlers": {
                "file": {
                    "class": "logging.FileHandler",
                    "formatter": "precise",
                    "filename": str(self.log_path),
                    "encoding": "utf8",
                }
            },
            "root": {"level": "WARNING", "handlers": ["file"]},
            "disable_existing_loggers": False,
        }
        log_config_path = self.folder / "log_config.yaml"
        log_config_path.write_text(json.dumps(log_config, indent=2))
        config = {
            "server_name": self.server_name,
            "listeners": [
                {
                    "port": self.port,
                    "bind_addresses": ["127.0.0.1"],
                    "type": "http",
                    "tls": False,
                    "x_forwarded": False,
                    "resources": [{"names": ["client"], "compress": False}],
                }
            ],
            "database": {
                "name": "sqlite3",
                "args": {"database": str(self.folder / "homeserver.db")},
            },
            "log_config": str(log_config_path),
            "media_store_path": str(self.folder / "media_store"),
            "signing_key_path": str(self.folder / "signing.key"),
            "registration_shared_secret": self._secret,
            "macaroon_secret_key": secrets.token_hex(32),
            "form_secret": secrets.token_hex(32),
            "enable_registration": False,
            "report_stats": False,
            "suppress_key_server_warning": True,
            "trusted_key_servers": [],
            "presence": {"enabled": False},
            "bcrypt_rounds": 4,
            **RATE_LIMITS,
        }
        self.config_path.write_text(json.dumps(config, indent=2))
        self._synapse("--generate-keys")

    def _synapse(self, *args: str) -> None:
        """Run Synapse's command line once (not the server) and wait for it."""
        self._check_installed()
        done = subprocess.run(
            [*self._command(), *args],
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            output = done.stdout + done.stderr
            raise SynapseError(f"synapse {' '.join(args)} failed ({done.returncode}):\n{output}")

    def _command(self) -> list[str]:
        return [str(self.python), "-m", "synapse.app.homeserver", "-c", str(self.config_path)]

    def _check_installed(self) -> None:
        if not self.python.exists():
            raise SynapseError(f"no Synapse at {self.python}: run `make synapse`")

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Launch Synapse and wait until it answers `/_matrix/client/versions`."""
        if self.running:
            raise SynapseError("Synapse is already running")
        self._check_installed()
        with self.out_path.open("ab") as out:
            self._process = subprocess.Popen(
                self._command(), cwd=self.folder, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )
        try:
            self._wait_ready(self._process, timeout)
        except BaseException:
            self.kill()
            raise

    def _wait_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as http:
            while True:
                code = process.poll()
                if code is not None:
                    raise SynapseError(f"Synapse exited ({code}) while starting\n{self.tail()}")
                try:
                    if http.get(f"{self.url}/_matrix/client/versions").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SynapseError(f"Synapse not ready within {timeout:g} s\n{self.tail()}")
                time.sleep(0.1)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, and SIGKILL if it has not exited within `timeout` (which then raises)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise SynapseError(
                f"Synapse ignored SIGTERM for {timeout:g} s\n{self.tail()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Stop and start again: the same port, config and database."""
        self.stop()
        self.start()

    def __enter__(self) -> Synapse:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def tail(self, lines: int = 40) -> str:
        """The last lines of Synapse's output and log, for a failure's message."""
        parts = []
        for path in (self.out_path, self.log_path):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if text.strip():
                parts.append(f"--- {path.name}:\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts) or "(Synapse wrote nothing)"

    def register(self, localpart: str, password: str, admin: bool = False) -> tuple[str, str]:
        """A new user, through the shared-secret admin API: its user ID and access token."""
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        with httpx.Client(timeout=HTTP_TIMEOUT_S) as http:
            nonce = http.get(endpoint).raise_for_status().json()["nonce"]
            fields = (nonce, localpart, password, "admin" if admin else "notadmin")
            message = b"\x00".join(field.encode() for field in fields)
            mac = hmac.new(self._secret.encode(), message, hashlib.sha1).hexdigest()
            body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin}
            response = http.post(endpoint, json=body | {"mac": mac})
        if response.status_code != 200:
            raise SynapseError(f"registering {localpart}: {response.status_code} {response.text}")
        answer = response.json()
        return answer["user_id"], answer["access_token"]
