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
from collections.abc import Iterator
from typing import NamedTuple

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
