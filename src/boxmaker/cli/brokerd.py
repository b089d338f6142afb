"""`brokerd`: the daemon that holds every tool and every grant (SPEC section 14).

    brokerd serve --config PATH [--log-level info|debug|warning] [--grace SECONDS]

Runs the self-test and exits 1 if anything fails, saying what (the config, the home's
brokerd lock, the workspace, the policy and its examples); binds `broker.sock` (0600 in a
folder its user alone can write; a live brokerd on it is refused); serves until SIGINT,
SIGTERM or SIGHUP, then stops accepting, lets running calls finish for the grace period and
exits 0. SIGUSR1 logs one status line. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import textwrap
from pathlib import Path

import trio

from ..broker import Broker, BrokerServer, BrokerTest, broker_self_test, builtin_registry
from ..clock import SystemClock
from ..config import defaults_text
from ..daemon import AlreadyServing, open_unix_listener
from ..session import Untrusted
from . import VersionAction
from .loopd import STOP, AcceptPaused

__all__ = ["main"]

log = logging.getLogger("brokerd")

SERVE_HELP = """\
Hold Boxmaker's tools and grants: check the config, the home, the workspace and the policy
(exit 1 saying what failed), then answer loopd's calls on broker.sock until SIGINT, SIGTERM or
SIGHUP, when running calls get --grace seconds to finish."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brokerd",
        description="Boxmaker's tool broker: runs the tools loopd's sessions call, under the "
        "owner's policy, and answers over a Unix socket.",
    )
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the daemon",
        description=SERVE_HELP,
        epilog="the config file's keys (shared with loopd), with their defaults:\n\n"
        + textwrap.indent(defaults_text(), "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--config", type=Path, required=True, help="the config.toml to use")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    serve.add_argument(
        "--grace", type=float, default=10.0,
        help="seconds running calls get to finish on SIGINT, SIGTERM or SIGHUP (default: 10)",
    )  # fmt: skip
    return parser


async def serve(config_path: Path, grace: float) -> int:
    result = await broker_self_test(config_path)
    try:
        return await _serve(result, grace)
    finally:
        if result.lock is not None:
            result.lock.release()


async def _serve(result: BrokerTest, grace: float) -> int:
    for check in result.checks:
        (log.info if check.ok else log.error)("self-test %s", check.line())
    if not result.ok or result.config is None or result.policy is None:
        log.error("self-test failed; brokerd is not starting")
        return 1
    config = result.config
    socket = config.broker.socket
    try:
        listener = await open_unix_listener(socket, "brokerd")
    except AlreadyServing as error:
        log.error("%s; not starting a second one", error)
        return 1
    except Untrusted as error:
        log.error("cannot listen: %s", error)
        return 1
    except OSError as error:
        log.error("cannot listen on %s: %s", socket, error.strerror or error)
        return 1
    broker = Broker(
        builtin_registry(config.tools.core),
        result.policy,
        config.tools.workspace,
        config.paths.home,
        SystemClock(),
        approval_timeout=config.tools.approval_timeout_s,
    )
    server = BrokerServer(broker)
    with trio.open_signal_receiver(*STOP, signal.SIGUSR1) as signals:
        log.info("listening on %s; workspace %s; policy %s", socket, config.tools.workspace,
                 result.policy.path)  # fmt: skip
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for number in signals:
                    name = signal.Signals(number).name
                    if number == signal.SIGUSR1:
                        log.info("%s: %s", name, server.status())
                        continue
                    log.info("%s: stopping; running calls get %g s to finish", name, grace)
                    server.stop(grace)
                    return

            nursery.start_soon(on_signal)
            await server.serve(listener)
            nursery.cancel_scope.cancel()
    log.info("stopped")
    return 0


def setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level.upper()),
        format="%(asctime)s brokerd %(levelname)s %(message)s",
        force=True,
    )
    logging.getLogger("trio.serve_listeners").addFilter(AcceptPaused())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "serve":
        parser.print_help()
        return 2
    setup_logging(args.log_level)
    os.umask(0o077)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    return trio.run(serve, args.config, args.grace)


if __name__ == "__main__":
    raise SystemExit(main())
