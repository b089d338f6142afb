"""`gatewayd`: the channel that carries a chat network's messages into sessions (SPEC
section 18); Matrix first.

    gatewayd serve --config PATH [--log-level info|debug|warning] [--grace SECONDS]

Runs the self-test and exits 1 if anything fails, saying what: the config (with
`[gateway.matrix]`), the home is its user's alone and no other gatewayd serves it
(`<home>/gatewayd.lock`), the gateway's state reads, and the bot's account signs in (its
token from `access_token_env`, or one kept 0600 in `<home>/gateway/token.json` from an earlier
login with the password of `password_env`). Then it keeps a watch on its rooms' sessions in
loopd and carries the owners' messages to them until SIGINT, SIGTERM or SIGHUP. It holds no
tool and no grant; it reaches loopd as `bxctl` does, over `loop.sock`. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import httpx
import trio

from .. import layout
from ..config import Config, MatrixConfig
from ..serving import STOP, Checks, daemon_parser, own_home, released, run_daemon
from ..session import SessionError
from .gateway import Gateway, GatewayStopped
from .matrix import Matrix, Refused, Unreachable
from .state import State, StateDamaged
from .status import Status
from .token import TokenFile

__all__ = ["main"]

log = logging.getLogger("gatewayd")

SERVE_HELP = """\
Carry the owners' messages from a chat network (Matrix) into Boxmaker's sessions: check the
config and the home (exit 1 saying what failed), sign in, then answer until SIGINT, SIGTERM
or SIGHUP."""


def build_parser() -> argparse.ArgumentParser:
    return daemon_parser(
        "gatewayd",
        "Boxmaker's chat gateway: your agent in your chat app (Matrix).",
        SERVE_HELP,
        "posts",
    )


async def serve(config_path: Path, grace: float) -> int:
    result = Checks()
    config = result.load(config_path)
    state = None
    if config is not None:
        state = _checked(config, result)
    return await released(result, partial(_serve, result, config, state, grace))


def _checked(config: Config, result: Checks) -> State | None:
    matrix = config.gateway.matrix
    if matrix is None:
        result.add("gateway", False, "the config has no [gateway.matrix]: nothing to carry")
        return None
    result.add("gateway", True, f"Matrix as {matrix.user_id} on {matrix.homeserver}")
    if not own_home(config.paths.home, result, layout.GATEWAY_LOCK, "gatewayd"):
        return None
    secret = matrix.access_token_env or matrix.password_env
    if not os.environ.get(secret):
        result.add("secret", False, f"${secret} is not set: it holds the bot's secret")
        return None
    result.add("secret", True, f"from ${secret}")
    state = State(config.paths.home)
    try:
        state.load()
    except (StateDamaged, SessionError, OSError) as error:
        result.add("state", False, str(error))
        return None
    result.add("state", True, f"{state.path}: {len(state.rooms)} rooms")
    return state


async def _serve(result: Checks, config: Config | None, state: State | None, grace: float) -> int:
    result.report(log)
    if not result.ok or config is None or state is None or config.gateway.matrix is None:
        log.error("self-test failed; gatewayd is not starting")
        return 1
    matrix = config.gateway.matrix
    async with httpx.AsyncClient() as http:
        network = Matrix(http, matrix.homeserver, matrix.user_id, "", matrix.sync_timeout_s)
        if not await _sign_in(network, matrix, TokenFile(config.paths.home)):
            return 1
        status = Status(config.paths.home, matrix.homeserver, matrix.user_id)
        gateway = Gateway(
            network, state, config.channel.socket, config.gateway, matrix, status, config.files
        )
        with trio.open_signal_receiver(*STOP) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_on, signals, nursery.cancel_scope)
                log.info("carrying %s's messages to %s", matrix.user_id, config.channel.socket)
                try:
                    await gateway.run()
                except GatewayStopped as error:
                    log.error("%s", error)
                    return 1
    log.info("stopped")
    return 0


async def _stop_on(signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
    async for number in signals:
        log.info("%s: stopping", signal.Signals(number).name)
        scope.cancel()
        return


async def _sign_in(network: Matrix, matrix: MatrixConfig, tokens: TokenFile) -> bool:
    """Sign the bot in: the variable's token, else the kept one, else a login with the
    password (its token then kept). False, said in the log, when it cannot."""
    if matrix.access_token_env:
        network.use_token(os.environ[matrix.access_token_env])
        return await _whoami(network, "the token of $" + matrix.access_token_env)
    kept = tokens.read(matrix.user_id)
    if kept is not None:
        network.use_token(kept)
        if await _whoami(network, f"the token kept in {tokens.path}", quiet=True):
            return True
    password = os.environ[matrix.password_env]
    while True:
        try:
            token, device = await network.login(password, matrix.device_name)
            break
        except Refused as error:
            log.error("the homeserver refused the login of %s: %s", matrix.user_id, error)
            return False
        except Unreachable as error:
            log.warning("signing in: %s; trying again in 5 s", error)
            await trio.sleep(5)
    tokens.write(matrix.user_id, token, device)
    log.info(
        "signed in as %s (device %s); the token is kept in %s", matrix.user_id, device, tokens.path
    )
    return True


async def _whoami(network: Matrix, what: str, quiet: bool = False) -> bool:
    while True:
        try:
            user = await network.whoami()
            break
        except Refused as error:
            (log.info if quiet else log.error)("%s was refused: %s", what, error)
            return False
        except Unreachable as error:
            log.warning("the homeserver: %s; trying again in 5 s", error)
            await trio.sleep(5)
    if user != network.user_id:
        log.error("%s signs in as %r, not [gateway.matrix] user_id %r", what, user, network.user_id)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    return run_daemon(build_parser(), serve, argv)


if __name__ == "__main__":
    raise SystemExit(main())
