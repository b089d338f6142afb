"""`make run`: the quick start. A real llama-server with the small model, `loopd serve`, and
`bxctl chat` in this terminal; both servers stop when the chat ends.

Everything lives in `.boxmaker/` of the current folder (or `$BOXMAKER_RUN_DIR`), kept across
runs so sessions persist: `config.toml` and `system.md` (written on the first run, yours to
edit), `home/` (the sessions and the socket), and the two servers' logs. The servers run in
their own process sessions, so Ctrl-C in the chat reaches only `bxctl`.

    python -m bxdev.run [bxctl chat options, e.g. --session ID]
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from boxmaker import SYSTEM_MD
from boxmaker.config import ConfigError, load_config

from .llama import LlamaServerError, free_port, server_args

__all__ = ["main"]

READY_S = 300.0


def _say(message: str) -> None:
    print(f"make run: {message}", file=sys.stderr, flush=True)


class Server:
    """A background process whose stderr goes to a log file; ready once a line says so."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log = log
        self._ready = threading.Event()
        self._needle = "listening on"
        self.process = subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C in the chat is not for it
        )
        assert self.process.stderr is not None
        threading.Thread(target=self._tee, args=(self.process.stderr,), daemon=True).start()

    def _tee(self, pipe: IO[bytes]) -> None:
        with self.log.open("ab") as out:
            for line in iter(pipe.readline, b""):
                out.write(line)
                out.flush()
                if self._needle.encode() in line:
                    self._ready.set()
        self._ready.set()  # it ended: wait() sees the exit code

    def wait_ready(self) -> bool:
        self._ready.wait(READY_S)
        return self.process.poll() is None and self._ready.is_set()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])


def prepare(root: Path) -> Path:
    """The config and system.md, written on the first run; the config's path."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.toml"
    if not (root / "system.md").exists():
        shutil.copyfile(SYSTEM_MD, root / "system.md")
    if not config.exists():
        config.write_text(
            "# Written by `make run` on its first run; edit freely (see the README).\n"
            "[server]\n"
            f'base_url = "http://127.0.0.1:{free_port()}"\n'
            "[paths]\n"
            'home = "home"\n'
            "[inference]\n"
            "max_tokens = 256  # the small model tends to go on; keep answers short\n"
        )
    return config


def main(argv: list[str] | None = None) -> int:
    root = Path(os.environ.get("BOXMAKER_RUN_DIR", ".boxmaker")).absolute()
    config_path = prepare(root)
    try:
        config = load_config(config_path)
    except ConfigError as error:
        _say(str(error))
        return 1
    url = urlsplit(config.server.base_url)
    if url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
        _say(f"{config_path}: [server] base_url must be a local port to start llama-server on")
        return 1
    env = {**os.environ, "BOXMAKER_HOME": str(config.paths.home)}
    bin_dir = Path(sys.executable).parent
    try:
        llama_args = server_args(url.port)
    except LlamaServerError as error:
        _say(str(error))
        return 1
    loopd_args = [str(bin_dir / "loopd"), "serve", "--config", str(config_path)]
    servers: list[Server] = []
    try:
        for name, args, where in (
            ("llama-server", llama_args, f" on {config.server.base_url}"),
            ("loopd", loopd_args, ""),
        ):
            server = Server(name, args, root / f"{name}.log", env)
            servers.append(server)
            _say(f"started {name} (pid {server.process.pid}){where}; log: {root}/{name}.log")
            if not server.wait_ready():
                _say(f"{name} did not start; its log ends:\n{server.tail()}")
                return 1
        _say(f"sessions are kept in {config.paths.home / 'sessions'}; /quit or Ctrl-D ends")
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # bxctl handles Ctrl-C
        try:
            chat = subprocess.run([str(bin_dir / "bxctl"), "chat", *(argv or sys.argv[1:])],
                                  env=env, check=False)  # fmt: skip
        finally:
            signal.signal(signal.SIGINT, previous)
        return chat.returncode
    finally:
        for server in reversed(servers):
            server.stop()
        if servers:
            _say("stopped loopd and llama-server")


if __name__ == "__main__":
    raise SystemExit(main())
