"""`brokerd`: the daemon that holds every tool and every grant (SPEC section 14).

    brokerd serve --config PATH [--log-level info|debug|warning] [--grace SECONDS]

Runs the self-test and exits 1 if anything fails, saying what (the config, the home's
brokerd lock, the workspace, the policy and its examples; it also says which sandbox `shell`
and `run_cell` get, or why none, which fails nothing but those two tools); binds
`broker.sock` (0600 in a folder its user alone can write; a live brokerd on it is refused);
starts the configured MCP servers (each kept running, started again after a fault); serves
until SIGINT, SIGTERM or SIGHUP, then stops accepting, lets running calls finish for
the grace period and exits 0. SIGUSR1 logs one status line. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import signal
from functools import partial
from pathlib import Path

import trio

from ..clock import SystemClock
from ..config import CALL_MARGIN_S
from ..serving import STOP, daemon_parser, listen, on_signals, released, run_daemon
from . import Broker, BrokerServer, BrokerTest, Hands, Memory, broker_self_test, builtin_registry
from .schedule_tools import Schedules

__all__ = ["main"]

log = logging.getLogger("brokerd")

SERVE_HELP = """\
Hold Boxmaker's tools and grants: check the config, the home, the workspace and the policy
(exit 1 saying what failed), then answer loopd's calls on broker.sock until SIGINT, SIGTERM or
SIGHUP, when running calls get --grace seconds to finish."""


def build_parser() -> argparse.ArgumentParser:
    return daemon_parser(
        "brokerd",
        "Boxmaker's tool broker: runs the tools loopd's sessions call, under the owner's "
        "policy, and answers over a Unix socket.",
        SERVE_HELP,
        "calls",
    )


async def serve(config_path: Path, grace: float) -> int:
    result = await broker_self_test(config_path)
    return await released(result, partial(_serve, result, grace))


async def _serve(result: BrokerTest, grace: float) -> int:
    result.report(log)
    if (
        not result.ok
        or result.config is None
        or result.policy is None
        or result.sandbox is None
        or result.workspace is None
    ):
        log.error("self-test failed; brokerd is not starting")
        return 1
    config = result.config
    if not result.sandbox.working:
        log.warning("no sandbox: %s", result.sandbox.reason)
    hands = Hands.of(result.sandbox, config)
    socket = config.broker.socket
    if (listener := await listen(socket, "brokerd", log)) is None:
        return 1
    clock = SystemClock()
    broker = Broker(
        builtin_registry(config.tools.core),
        result.policy,
        result.workspace,
        config.paths.home,
        clock,
        approval_timeout=config.tools.approval_timeout_s,
        hands=hands,
        memory=Memory(config.paths.home, clock, config.memory),
        schedules=Schedules(config.paths.home, clock, config.schedules),
    )
    if config.mcp:  # the SDK is imported only when there is a server to run
        from . import McpServer

        limit = config.tools.call_timeout_s - CALL_MARGIN_S
        broker.servers = {
            name: McpServer(
                name,
                mcp,
                result.sandbox,
                broker.update_tools,
                call_limit=limit,
                guarded=result.guarded,
            )
            for name, mcp in config.mcp.items()
        }
    server = BrokerServer(broker)
    with trio.open_signal_receiver(*STOP, signal.SIGUSR1) as signals:
        log.info(
            "listening on %s; workspace %s; policy %s",
            socket,
            config.tools.workspace,
            result.policy.path,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(hands.kernels.run)
            await nursery.start(broker.memory.serve)
            nursery.start_soon(broker.checkpoints.warm, broker.roots)
            for mcp_server in broker.servers.values():
                nursery.start_soon(mcp_server.run)
            nursery.start_soon(on_signals, signals, server, grace, "calls", log)
            await server.serve(listener)
            nursery.cancel_scope.cancel()
    log.info("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_daemon(build_parser(), serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
