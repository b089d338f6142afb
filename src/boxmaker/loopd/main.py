"""`loopd`: the agent-loop daemon (SPEC section 8).

    loopd serve --config PATH [--log-level info|debug|warning] [--grace SECONDS]
    loopd replay SESSION | --all ...      (loopd/replay/command_line.py; `bxctl replay` runs it)

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
import signal
import sys
from functools import partial
from pathlib import Path

import trio

from ..clock import SystemClock
from ..serving import STOP, BrokerPort, daemon_parser, listen, on_signals, released, run_daemon
from ..store import Store, clear_uploads
from .infer import Servers
from .recovery import close_interrupted
from .scheduler import Scheduler
from .selftest import SelfTest, self_test
from .serve import ChannelServer
from .service import Daemon, memory_of

__all__ = ["main"]

log = logging.getLogger("loopd")

SERVE_HELP = """\
Run the agent loop: check the config, the home folder, system.md, the baseline's size and
llama-server's /health (exit 1 saying what failed), then serve turns on the socket until
SIGINT or SIGTERM, when running turns get --grace seconds to finish. Logs go to stderr, one
line per turn; message text only at --log-level debug."""


def build_parser() -> argparse.ArgumentParser:
    return daemon_parser(
        "loopd",
        "Boxmaker's agent loop: runs turns for sessions kept on disk, talking to a local "
        "llama-server, and streams them over a Unix socket.",
        SERVE_HELP,
        "turns",
    )


async def serve(config_path: Path, grace: float) -> int:
    result = await self_test(config_path)
    return await released(result, partial(_serve, result, grace))


async def _serve(result: SelfTest, grace: float) -> int:
    result.report(log)
    if not result.ok or result.config is None:
        log.error("self-test failed; loopd is not starting")
        return 1
    config = result.config
    clock = SystemClock()
    store = Store(config.paths.home, clock, memory=memory_of(config))
    for stale in store.sweep():
        log.info("removed %s, left by a session creation that never finished", stale)
    interrupted = await trio.to_thread.run_sync(close_interrupted, store, clock.now)
    await trio.to_thread.run_sync(clear_uploads, config.paths.home)  # no turn can name one
    socket = config.channel.socket
    if (listener := await listen(socket, "loopd", log)) is None:
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
            daemon.interrupted = {turn.session: turn.origin for turn in interrupted}
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
                await nursery.start(daemon.tell_broker)
                await nursery.start(daemon.serve)
                schedules = config.schedules
                scheduler = Scheduler(
                    daemon, config.paths.home, schedules, lambda: clock.now().value
                )
                await nursery.start(scheduler.run)

                nursery.start_soon(on_signals, signals, server, grace, "turns", log)
                await server.serve(listener)
                # Detached turns keep no connection open: they have their grace too.
                if not daemon.quiet.is_set():
                    log.info("waiting for the turns still running: %s", daemon.status())
                with trio.move_on_after(grace + 1):
                    await daemon.quiet.wait()
                nursery.cancel_scope.cancel()
            daemon.close()
    log.info("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["replay"]:  # not a daemon: a command of its own (SPEC section 20)
        from .replay.command_line import run_replay

        return run_replay(given[1:])
    return run_daemon(build_parser(), serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
