"""The verify-gateway tier: the gateway against a real Matrix homeserver (Synapse, installed by
`make synapse` into its own venv, `.venv/synapse`), run on loopback once per session.

Without Synapse the tests skip, saying to run `make synapse`; with `BOXMAKER_REQUIRE_MATRIX`
set (`make verify-gateway`) they fail instead. Each test registers its own users, so tests share
the homeserver but never a user or a room.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest
from bxdev.synapse import Synapse, synapse_python

_USERS = itertools.count(1)


class Account(NamedTuple):
    """A registered user: its ID, an access token and its password (to log in again)."""

    user_id: str
    token: str
    password: str


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """A started homeserver, stopped at the end of the session."""
    python = synapse_python()
    if not python.exists():
        message = f"Synapse is not installed at {python}: run `make synapse`"
        if os.environ.get("BOXMAKER_REQUIRE_MATRIX"):
            pytest.fail(message)
        pytest.skip(message)
    with Synapse(tmp_path_factory.mktemp("synapse"), python=python) as server:
        yield server


def register(synapse: Synapse, role: str) -> Account:
    """A new user named after its role and a counter, unique in the session."""
    password = secrets.token_hex(8)
    user_id, token = synapse.register(f"{role}{next(_USERS)}", password)
    return Account(user_id, token, password)


@pytest.fixture
def owner(synapse: Synapse) -> Account:
    """The person the gateway serves."""
    return register(synapse, "owner")


@pytest.fixture
def stranger(synapse: Synapse) -> Account:
    """Someone else on the homeserver."""
    return register(synapse, "stranger")


@pytest.fixture
def bot(synapse: Synapse) -> Account:
    """The gateway's own account."""
    return register(synapse, "bot")


if TYPE_CHECKING:
    from .rig import GatewayRig

MakeRig = Callable[..., "GatewayRig"]


@pytest.fixture
def make_rig(
    request: pytest.FixtureRequest, tmp_path: Path, synapse: Synapse, bot: Account, owner: Account
) -> Iterator[MakeRig]:
    """Start a GatewayRig (the fake server, brokerd, loopd and gatewayd) for the owner and the
    bot, with a script (else the test module's `SCRIPT`) and its module's `POLICY` if it has
    one; every rig made is stopped at the end."""
    from .rig import GatewayRig

    made: list[GatewayRig] = []

    def make(script: dict[str, Any] | None = None, **options: Any) -> GatewayRig:
        options.setdefault("policy", getattr(request.module, "POLICY", None))
        script = request.module.SCRIPT if script is None else script
        rig = GatewayRig(tmp_path / str(len(made)), synapse, bot, owner, script, **options)
        made.append(rig)
        rig.start_gatewayd()
        return rig

    try:
        yield make
    finally:
        for rig in made:
            rig.stop()
