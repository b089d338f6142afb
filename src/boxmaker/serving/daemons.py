"""What `loopd` and `brokerd` share as commands: `<daemon> serve --config PATH [--log-level]
[--grace]`, logs on stderr in one format, the signals that stop them, and the start-up
(a private umask, SIGUSR1 never fatal, then trio)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from ..config import defaults_text
from ..session import Exposed
from ..version import VersionAction
from .checks import Checks
from .listener import AlreadyServing, UnixListener, open_unix_listener

__all__ = [
    "STOP",
    "AcceptPaused",
    "daemon_parser",
    "listen",
    "on_signals",
    "released",
    "run_daemon",
    "setup_logging",
]

STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: its terminal closed


def daemon_parser(
    prog: str, description: str, serve_help: str, work: str
) -> argparse.ArgumentParser:
    """`prog serve --config PATH [--log-level ...] [--grace S]`; `work` names what the grace
    lets finish (turns, calls)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the daemon",
        description=serve_help,
        epilog="the config file's keys (one file for loopd and brokerd), every one optional, "
        "with their defaults:\n\n" + textwrap.indent(defaults_text(), "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--config", type=Path, required=True, help="the config.toml to use")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning"],
        help="debug also logs message content (default: info)",
    )
    serve.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help=f"seconds running {work} get to finish on SIGINT, SIGTERM or SIGHUP (default: 10)",
    )
    return parser


class AcceptPaused(logging.Filter):
    """`trio.serve_listeners` logs every accept that fails for want of descriptors (ten a second
    while it lasts), each with a traceback: one line in the daemon's words per `every`
    seconds."""

    def __init__(self, every: float = 10.0) -> None:
        super().__init__()
        self._every = every
        self._last = -math.inf

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self._last < self._every:
            return False
        self._last = now
        record.msg = "cannot accept connections: %s (%s); pausing until it passes, every %g s"
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = record.exc_text = None
        return True


def setup_logging(level: str, name: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level.upper()),
        format=f"%(asctime)s {name} %(levelname)s %(message)s",
        force=True,
    )
    logging.getLogger("trio.serve_listeners").addFilter(AcceptPaused())
    if level != "debug":  # one line per request from httpx is noise at info
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("httpcore").setLevel(logging.WARNING)


async def listen(socket: Path, who: str, log: logging.Logger) -> UnixListener | None:
    """The daemon's socket, or None when it cannot listen (said in the log)."""
    try:
        return await open_unix_listener(socket, who)
    except AlreadyServing as error:
        log.error("%s; not starting a second one", error)
    except Exposed as error:
        log.error("cannot listen: %s", error)
    except OSError as error:
        log.error("cannot listen on %s: %s", socket, error.strerror or error)
    return None


async def on_signals(
    signals: AsyncIterator[int], server: Any, grace: float, work: str, log: logging.Logger
) -> None:
    """SIGUSR1 logs `server.status()`; the first stop signal stops `server` with `grace`."""
    async for number in signals:
        name = signal.Signals(number).name
        if number == signal.SIGUSR1:
            log.info("%s: %s", name, server.status())
            continue
        log.info("%s: stopping; running %s get %g s to finish", name, work, grace)
        server.stop(grace)
        return


def run_daemon(
    parser: argparse.ArgumentParser,
    serve: Callable[[Path, float], Awaitable[int]],
    argv: list[str] | None,
) -> int:
    """Parse `argv`, and for `serve` run the daemon: its exit status."""
    args = parser.parse_args(argv)
    if args.command != "serve":
        parser.print_help()
        return 2
    setup_logging(args.log_level, parser.prog)
    os.umask(0o077)  # whatever the daemon writes is its owner's alone
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # never fatal, even before it is listened to
    return trio.run(serve, args.config, args.grace)


async def released(result: Checks, serve: Callable[[], Awaitable[int]]) -> int:
    """`serve()`, then the home's lock the self-test took is released (the process's end
    would drop it too)."""
    try:
        return await serve()
    finally:
        if result.lock is not None:
            result.lock.release()
