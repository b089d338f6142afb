"""One virtual environment per peer, made from its pinned requirements file and kept in the
cache outside the checkout (`$BOXMAKER_CACHE/peers/`, beside the real server), so a second
`make bench` reuses it and a fresh clone on the same machine does too.

An environment's folder is named by a digest of its requirements file and of the Python that
made it: a change of pin makes a new one. Every package is pinned (the requirements file is a
whole `pip freeze`), so pip installs them with `--no-deps` and `pip check` proves nothing is
missing. A folder counts as made only once its `.ready` file is written; an install cut
halfway is thrown away and made again. A lock keeps two benches from making the same one.
"""

from __future__ import annotations

import fcntl
import hashlib
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import attrs

from ... import llama_build

__all__ = ["PEERS", "PeerEnv", "ensure_env", "env_dir", "pinned", "requirements_file"]

PEERS = ("pydantic-ai", "openai-agents", "llm")
# The distribution a person installs for each peer, as named in its requirements file.
TOP_LEVEL = {"pydantic-ai": "pydantic-ai-slim", "openai-agents": "openai-agents", "llm": "llm"}
REQUIREMENTS = Path(__file__).parent / "requirements"
INSTALL_TIMEOUT_S = 900.0


class EnvError(Exception):
    """A peer's environment could not be made; the message holds pip's own words."""


@attrs.frozen
class PeerEnv:
    peer: str
    folder: Path
    reused: bool

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"


def requirements_file(peer: str) -> Path:
    return REQUIREMENTS / f"{peer}.txt"


def pinned(peer: str) -> dict[str, str]:
    """The pinned versions of a peer's requirements file, by distribution name."""
    versions = {}
    for line in requirements_file(peer).read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            versions[name.lower().replace("_", "-")] = version
    return versions


def env_dir(peer: str) -> Path:
    recipe = requirements_file(peer).read_bytes() + f"\n{sys.base_prefix}\n".encode()
    key = hashlib.sha256(recipe + platform.python_version().encode()).hexdigest()[:12]
    return llama_build.cache_root() / "peers" / f"{peer}-{key}"


def ensure_env(peer: str) -> PeerEnv:
    """The peer's environment, made now unless a finished one is in the cache.

    Raises:
        EnvError: `venv`, `pip install` or `pip check` failed.
    """
    folder = env_dir(peer)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / ".ready").is_file():
            return PeerEnv(peer, folder, reused=True)
        shutil.rmtree(folder, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(folder)])
        env = PeerEnv(peer, folder, reused=False)
        python = str(env.python)
        quiet = ["--quiet", "--disable-pip-version-check", "--no-input"]
        pins = str(requirements_file(peer))
        _run([python, "-m", "pip", "install", *quiet, "--no-deps", "-r", pins])
        _run([python, "-m", "pip", "check", "--disable-pip-version-check"])
        (folder / ".ready").write_text(requirements_file(peer).read_text())
        return env


def _run(args: list[str]) -> None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise EnvError(f"{' '.join(args)} took over {INSTALL_TIMEOUT_S:.0f} s") from exc
    if done.returncode:
        output = (done.stdout + done.stderr).strip()[-3000:]
        raise EnvError(f"{' '.join(args)} failed ({done.returncode}):\n{output}")
