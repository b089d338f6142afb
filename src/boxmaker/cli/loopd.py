"""`loopd`: the agent-loop daemon (SPEC section 8).

    loopd serve --config PATH [--log-level info|debug|warning] [--grace SECONDS]

Runs the self-test and exits 1 if anything fails, saying what: first that the home is its
user's alone and no other loopd serves it (the home's lock), and nothing is touched before
that; binds the socket (0600 in a 0700 folder; a live loopd on it is refused); serves until
SIGINT, SIGTERM or SIGHUP, then stops accepting, lets running turns finish for the grace
period, cancels what is left and exits 0. SIGUSR1 logs one status line. Logs go to stderr,
one line per event of note; message content only at debug level.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import trio

from ..clock import SystemClock
from ..config import defaults_text
from ..daemon import (
    AlreadyServing,
    ChannelServer,
    Daemon,
    SelfTest,
    open_unix_listener,
    self_test,
)
from ..infer import Servers
from ..loop import BrokerPort
from ..session import Untrusted
from ..store import Store
from . import VersionAction

__all__ = ["main"]

log = logging.getLogger("loopd")

SERVE_HELP = """\
Run the agent loop: check the config, the home folder, system.md, the baseline's size and
llama-server's /health (exit 1 saying what failed), then serve turns on the socket until
SIGINT or SIGTERM, when running turns get --grace seconds to finish. Logs go to stderr, one
line per turn; message text only at --log-level debug."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopd",
        description="Boxmaker's agent loop: runs turns for sessions kept on disk, "
        "talking to a local llama-server, and streams them over a Unix socket.",
    )
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the daemon",
        description=SERVE_HELP,
        epilog="the config file's keys, every one optional, with their defaults:\n\n"
        + textwrap.indent(defaults_text(), "  "),
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
        help="seconds running turns get to finish on SIGINT, SIGTERM or SIGHUP (default: 10)",
    )
    return parser


class AcceptPaused(logging.Filter):
    """`trio.serve_listeners` logs every accept that fails for want of descriptors (ten a second
    while it lasts), each with a traceback: one line in loopd's words per `every` seconds."""

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


def setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level.upper()),
        format="%(asctime)s loopd %(levelname)s %(message)s",
        force=True,
    )
    logging.getLogger("trio.serve_listeners").addFilter(AcceptPaused())
    if level != "debug":  # one line per request from httpx is noise at info
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("httpcore").setLevel(logging.WARNING)


STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: its terminal closed


async def serve(config_path: Path, grace: float) -> int:
    result = await self_test(config_path)
    try:
        return await _serve(result, grace)
    finally:
        if result.lock is not None:  # the process's end would drop it too
            result.lock.release()


async def _serve(result: SelfTest, grace: float) -> int:
    for check in result.checks:
        (log.info if check.ok else log.error)("self-test %s", check.line())
    if not result.ok or result.config is None:
        log.error("self-test failed; loopd is not starting")
        return 1
    config = result.config
    clock = SystemClock()
    store = Store(config.paths.home, clock)
    for stale in store.sweep():
        log.info("removed %s, left by a session creation that never finished", stale)
    socket = config.channel.socket
    try:
        listener = await open_unix_listener(socket)
    except AlreadyServing as error:
        log.error("%s; not starting a second one", error)
        return 1
    except Untrusted as error:
        log.error("cannot listen: %s", error)
        return 1
    except OSError as error:
        log.error("cannot listen on %s: %s", socket, error.strerror or error)
        return 1
    # Taken before anyone is told loopd listens: a signal from then on stops it gracefully
    # (or asks its status), and one that comes before the task below runs waits for it.
    with trio.open_signal_receiver(*STOP, signal.SIGUSR1) as signals:
        async with Servers(config, profiles=result.profiles) as servers:
            daemon = Daemon(
                config,
                servers,
                BrokerPort(config.broker.socket, config.tools.call_timeout_s),
                clock,
                store=store,
                profiles=result.profiles,
            )
            server = ChannelServer(daemon)
            # Which process each server is, before any turn (asked of all at once).
            deadline = max(config.server_config(name).connect_timeout_s for name in servers.clients)
            with trio.move_on_after(deadline):
                await daemon.watch.start()
            urls = ", ".join(config.server_config(name).base_url for name in servers.clients)
            log.info("listening on %s; servers %s; sessions in %s", socket, urls, store.sessions)
            async with trio.open_nursery() as nursery:
                if daemon.slot_cache is not None:
                    await nursery.start(daemon.slot_cache.serve)

                async def on_signal() -> None:
                    async for number in signals:
                        name = signal.Signals(number).name
                        if number == signal.SIGUSR1:
                            log.info("%s: %s", name, server.status())
                            continue
                        log.info("%s: stopping; running turns get %g s to finish", name, grace)
                        server.stop(grace)
                        return

                nursery.start_soon(on_signal)
                await server.serve(listener)
                nursery.cancel_scope.cancel()
            daemon.close()
    log.info("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "serve":
        parser.print_help()
        return 2
    setup_logging(args.log_level)
    os.umask(0o077)  # whatever loopd writes is its owner's alone
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # never fatal, even before it is listened to
    return trio.run(serve, args.config, args.grace)


if __name__ == "__main__":
    raise SystemExit(main())
