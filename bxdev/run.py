"""`make run`, `make serve` and `make stop`: the quick start.

`run` starts a real llama-server with the small model (built and fetched once per machine,
`llama_build`), `brokerd serve` and `loopd serve`, opens `bxctl chat` in this terminal, and
stops the servers when the chat ends. `serve` starts the same three in the background and
prints the `bxctl` line other terminals use; `stop` stops them. Both start `gatewayd serve`
beside them when the config has `[gateway.matrix]`; `gateway` is `serve` that refuses without
it. Your own model (`own_model`): `--model PATH` (`MODEL=`, or `model =` in
`llama-server.toml`) starts llama-server with that GGUF file instead; `--server URL`
(`SERVER=`) starts no llama-server and builds nothing, and uses the server running there.

Everything lives in `.boxmaker/` of the current folder (or `$BOXMAKER_RUN_DIR`), kept across
runs so sessions persist: `config.toml`, `system.md` and `policy.toml` (written on the first
run, yours to edit), `llama-server.toml` (the model, context and threads llama-server gets),
`server-config.toml` (the config of a `--server` run, written from `config.toml`), `home/`
(the sessions, the sockets, and `workspace/`, the folder the file tools reach, unless
`$BOXMAKER_WORKSPACE` names another: `make run WORKSPACE=...`), and the servers' logs. One
instance per checkout: a second says what runs and how to reach it.

    python -m bxdev.run [run|serve|gateway|stop] [--ctx N] [--threads N] [--model PATH]
                        [--server URL] [-- bxctl chat options]
"""

from __future__ import annotations

import difflib
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from attrs import frozen

from boxmaker import SYSTEM_MD
from boxmaker.config import Config, ConfigError, load_config

from . import llama_build
from .llama import LlamaServerError, free_port, server_args
from .own_model import Refused, Served, check_gguf, probe, write_run_config
from .servers import Busy, Instance, Server, bxctl_line, port_taken, stop_recorded
from .steps import duration

__all__ = ["main"]

LLAMA_TOML = """\
# llama-server as `make run` and `make serve` start it (written on the first run; edit freely).
# `make run CTX=8192 THREADS=4 MODEL=path.gguf` overrides ctx, threads and model for one run.
# model = "/path/to/model.gguf"  # your own GGUF instead of the small model (relative: to here)
ctx = 4096     # tokens of context (-c); a session must fit in it
threads = 0    # CPU threads (-t); 0 is one per core
flags = []     # more llama-server flags, e.g. ["--chat-template-file", "/path/to/t.jinja"]
"""
LLAMA_KEYS = {"model": str, "ctx": int, "threads": int, "flags": list}


class RunError(Exception):
    """What stops `make run`; the message says what to do."""


@frozen
class Options:
    """`make run`'s own options (the rest go to `bxctl chat`)."""

    command: str = "run"
    ctx: int | None = None
    threads: int | None = None
    model: str | None = None  # a GGUF file, or with `server` the model an OpenAI-style one lists
    server: str | None = None
    chat_args: tuple[str, ...] = ()


@frozen
class LlamaSettings:
    """llama-server's: the context, the threads, more flags, and the model file (None: the
    small model) with where it was named, for a refusal to say."""

    ctx: int
    threads: int
    flags: tuple[str, ...]
    model: Path | None = None
    given: str = ""


def _say(command: str, message: str) -> None:
    print(f"make {command}: {message}", file=sys.stderr, flush=True)


def prepare(root: Path) -> Path:
    """The config files and system.md, written on the first run; loopd's config's path."""
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
            "[cache]\n"
            'save_dir = "slots"  # slots saved here: a session is warm after a restart\n'
        )
    if not (root / "llama-server.toml").exists():
        (root / "llama-server.toml").write_text(LLAMA_TOML)
    return config


def llama_settings(path: Path, options: Options) -> LlamaSettings:
    """The model, ctx, threads and more flags from `llama-server.toml`, the command line's
    first. A model the file names is taken against the file's folder, one the command line
    names against the current one (the checkout, for make).

    Raises:
        RunError: the file is not valid, or a value is out of range.
    """
    try:
        raw: dict[str, Any] = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RunError(f"{path}: {exc}") from None
    for key, value in raw.items():
        if key not in LLAMA_KEYS:
            close = difflib.get_close_matches(key, LLAMA_KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise RunError(f"{path}: unknown key {key!r}{hint} (known: {', '.join(LLAMA_KEYS)})")
        if type(value) is not LLAMA_KEYS[key]:
            raise RunError(f"{path}: {key} must be a {LLAMA_KEYS[key].__name__}, got {value!r}")
    flags = raw.get("flags", [])
    if not all(isinstance(flag, str) for flag in flags):
        raise RunError(f"{path}: flags must be a list of strings, got {flags!r}")
    ctx = raw.get("ctx", 4096) if options.ctx is None else options.ctx
    threads = raw.get("threads", 0) if options.threads is None else options.threads
    if ctx < 256:
        raise RunError(f"the context must be at least 256 tokens, got {ctx}")
    if threads < 0:
        raise RunError(f"threads must be 0 (one per core) or more, got {threads}")
    model, given = None, ""
    if options.model is not None:
        model, given = Path(options.model).expanduser().absolute(), f"MODEL={options.model}"
    elif "model" in raw:
        model, given = path.parent / Path(raw["model"]).expanduser(), f"model = in {path}"
    return LlamaSettings(ctx, threads or (os.cpu_count() or 2), tuple(flags), model, given)


def parse(argv: list[str]) -> Options:
    """`make run`'s options from `[run|serve|gateway|stop] [--ctx N] [--threads N] [--model
    PATH] [--server URL] [--] [bxctl options]`; options after `--` (or not ours) go to bxctl.

    Raises:
        RunError: a number that is not one, an option without its value, or `--server` with
            the context or threads of a llama-server it does not start.
    """
    command = argv.pop(0) if argv and argv[0] in ("run", "serve", "gateway", "stop") else "run"
    found: dict[str, Any] = {}
    while argv and argv[0] in ("--ctx", "--threads", "--model", "--server"):
        name = argv[0].removeprefix("--")
        if len(argv) < 2 or not argv[1]:
            raise RunError(f"{argv[0]} takes a value ({name.upper()}=...)")
        if name in ("ctx", "threads") and not argv[1].isdigit():
            raise RunError(f"{argv[0]} takes a whole number (CTX=8192, THREADS=4)")
        found[name] = int(argv[1]) if name in ("ctx", "threads") else argv[1]
        del argv[:2]
    if argv and argv[0] == "--":
        argv.pop(0)
    if "server" in found and ({"ctx", "threads"} & found.keys()):
        raise RunError(
            "CTX and THREADS are for the llama-server `make run` starts; with SERVER= the "
            "server runs as it was started"
        )
    return Options(command, chat_args=tuple(argv), **found)


def what_serves(root: Path, config: Config, options: Options) -> LlamaSettings | Served:
    """The llama-server to start (its settings, the model checked) or the server that runs
    (asked what it is). Nothing is started or written.

    Raises:
        RunError: `llama-server.toml` is not valid.
        Refused: the model is not a readable GGUF file, or nothing usable answers at the
            server's address.
    """
    if options.server is None:
        settings = llama_settings(root / "llama-server.toml", options)
        if settings.model is not None:
            check_gguf(settings.model, settings.given)
        return settings
    key_env = config.server.api_key_env
    key = os.environ.get(key_env, "") if key_env else ""
    return probe(options.server.rstrip("/"), options.model or "", key)


def start_llama(command: str, root: Path, config: Config, settings: LlamaSettings,
                env: dict[str, str], keep: tuple[int, ...],
                servers: list[Server]) -> None:  # fmt: skip
    """Start llama-server on the port of `[server] base_url`, waited for, into `servers`.

    Raises:
        RunError: the address is not a loopback port, the port is taken, or the server did
            not start (the message holds the end of its log).
    """
    url = urlsplit(config.server.base_url)
    if url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
        raise RunError(
            f"{root / 'config.toml'}: [server] base_url must be http://127.0.0.1:PORT, the port "
            "to start llama-server on"
        )
    if port_taken(url.port):
        raise RunError(
            f"port {url.port} ([server] base_url in {root / 'config.toml'}) is taken by another "
            "program; stop it, or change the port there"
        )
    flags = list(settings.flags)
    if (saves := config.cache.save_dir) is not None:  # the server saves the slots loopd asks
        saves.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = [*flags, "--slot-save-path", f"{saves}/"]
    try:
        llama_args = server_args(url.port, ctx=settings.ctx, threads=settings.threads,
                                 extra=flags, model=settings.model)  # fmt: skip
    except LlamaServerError as error:
        raise RunError(str(error)) from None
    llama = Server("llama-server", llama_args, root / "llama-server.log", env, keep)
    servers.append(llama)
    model = "the small model" if settings.model is None else settings.model.name
    _say(
        command,
        f"started llama-server (pid {llama.pid}) on {config.server.base_url} with {model}, "
        f"{settings.ctx} tokens of context and {settings.threads} threads; loading the model",
    )
    began = time.monotonic()
    if not llama.wait_http(f"{config.server.base_url}/health"):
        raise RunError(f"llama-server did not start; {llama.log} ends:\n{llama.tail()}")
    _say(command, f"llama-server ready in {duration(time.monotonic() - began)}")


def start(command: str, root: Path, config_path: Path, config: Config, instance: Instance,
          llama: LlamaSettings | Served, servers: list[Server]) -> None:  # fmt: skip
    """Start llama-server with `llama`'s settings (none for a server that runs, `Served`:
    the daemons read the run's config, written from `config_path` once the checkout is
    ours), brokerd, then loopd, each waited for, into `servers` (the caller stops them).

    Raises:
        Busy: another instance runs in this checkout.
        RunError: a server could not start (the message holds the end of its log), or the
            port is taken.
    """
    keep = (instance.acquire(),)
    env = {**os.environ, "BOXMAKER_HOME": str(config.paths.home)}
    if isinstance(llama, Served):
        config_path = write_run_config(config_path, llama)
        what = "llama-server" if llama.kind == "llama-server" else "OpenAI-style server"
        _say(command, f"using the {what} at {llama.url} (model {llama.model!r:.80}, profile "
             "chosen by loopd's self-test); nothing built or downloaded")  # fmt: skip
    else:
        start_llama(command, root, config, llama, env, keep, servers)
    brokerd = Path(sys.executable).parent / "brokerd"
    brokerd_args = [str(brokerd), "serve", "--config", str(config_path)]
    loopd = Path(sys.executable).parent / "loopd"
    loopd_args = [str(loopd), "serve", "--config", str(config_path)]
    broker = Server("brokerd", brokerd_args, root / "brokerd.log", env, keep)
    servers.append(broker)
    _say(command, f"started brokerd (pid {broker.pid}); workspace {config.tools.workspace}; "
         f"log: {broker.log}")  # fmt: skip
    if not broker.wait_socket(config.broker.socket):
        broker.process.wait(5)
        raise RunError(f"brokerd did not start; {broker.log} ends:\n{broker.tail()}")
    loopd_server = Server("loopd", loopd_args, root / "loopd.log", env, keep)
    servers.append(loopd_server)
    _say(command, f"started loopd (pid {loopd_server.pid}); log: {loopd_server.log}")
    if not loopd_server.wait_socket(config.channel.socket):
        loopd_server.process.wait(5)
        raise RunError(f"loopd did not start; {loopd_server.log} ends:\n{loopd_server.tail()}")
    if config.gateway.matrix is not None:  # the chat network's channel, beside them
        gatewayd = Path(sys.executable).parent / "gatewayd"
        args = [str(gatewayd), "serve", "--config", str(config_path)]
        gateway = Server("gatewayd", args, root / "gatewayd.log", env, keep)
        servers.append(gateway)
        _say(command, f"started gatewayd (pid {gateway.pid}) for {config.gateway.matrix.user_id}"
             f" on {config.gateway.matrix.homeserver}; log: {gateway.log}")  # fmt: skip
        if not gateway.wait_line("carrying"):
            gateway.stop()
            raise RunError(f"gatewayd did not start; {gateway.log} ends:\n{gateway.tail()}")


def main(argv: list[str] | None = None) -> int:
    began = time.monotonic()
    root = Path(os.environ.get("BOXMAKER_RUN_DIR", ".boxmaker")).absolute()
    try:
        options = parse(list(sys.argv[1:] if argv is None else argv))
    except RunError as error:
        _say("run", str(error))
        return 2
    command = options.command
    instance = Instance(root)
    if command == "stop":
        stopped = stop_recorded(instance) if root.exists() else []
        _say("stop", f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
        return 0
    try:
        config_path = prepare(root)
        config = load_config(config_path)
        if command == "gateway" and config.gateway.matrix is None:
            raise RunError(f"{config_path} has no [gateway.matrix]: the README's Gateway "
                           "section says what to write there")  # fmt: skip
        command = "serve" if command == "gateway" else command
        llama = what_serves(root, config, options)
    except (ConfigError, RunError, Refused) as error:
        _say(command, str(error))  # nothing was started
        return 1
    if isinstance(llama, LlamaSettings) and llama_build.main([]) != 0:
        return 1  # the build said why
    bxctl = Path(sys.executable).parent / "bxctl"
    line = bxctl_line(config.paths.home, bxctl)
    servers: list[Server] = []
    try:
        start(command, root, config_path, config, instance, llama, servers)
        instance.write(command, servers, line)
        if command == "serve":
            _say("serve", f"ready in {duration(time.monotonic() - began)}; logs in {root}")
            _say("serve", "chat from any terminal with the line below; `make stop` stops both")
            print(line, flush=True)
            servers = []  # they keep running
            return 0
        _say("run", f"ready in {duration(time.monotonic() - began)}; sessions are kept in "
             f"{config.paths.home / 'sessions'}")  # fmt: skip
        _say("run", f"other terminals reach these servers with:  {line}")
        _say("run", "/help lists the chat's commands; /quit or Ctrl-D ends it and both servers")
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # bxctl handles Ctrl-C
        try:
            env = {**os.environ, "BOXMAKER_HOME": str(config.paths.home)}
            chat = subprocess.run([str(bxctl), "chat", *options.chat_args], env=env, check=False)
        finally:
            signal.signal(signal.SIGINT, previous)
        return chat.returncode
    except (Busy, RunError) as error:
        _say(command, str(error))
        return 1
    finally:
        for server in reversed(servers):
            server.stop()
        if servers:
            instance.forget()
            names = [server.name for server in reversed(servers)]
            _say(command, f"stopped {', '.join(names[:-1])} and {names[-1]}")
        instance.release()


if __name__ == "__main__":
    raise SystemExit(main())
