"""gatewayd's section of `config.toml` (SPEC section 18): `[gateway]` (its bounds) and
`[gateway.matrix]` (the homeserver, the bot's account, and the owners, who alone may speak).
Pure."""

from __future__ import annotations

import re
from typing import Any

from attrs import Attribute, field, frozen

from ..proto import InvalidValue
from ._checks import at_least, check_url, positive

__all__ = ["MATRIX_EVENT_BYTES", "GatewayConfig", "MatrixConfig"]

MATRIX_EVENT_BYTES = 65536  # the largest event a homeserver takes, whole
_USER_ID = re.compile(r"@[a-z0-9._=/+-]+:[A-Za-z0-9.:\[\]-]+")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_user(_instance: Any, attribute: Attribute[Any], user: str) -> None:
    if not _USER_ID.fullmatch(user) or len(user) > 255:
        raise InvalidValue(f"{user!r} is not a Matrix user id (@name:server)", attribute.name)


def _check_owners(instance: Any, attribute: Attribute[Any], owners: tuple[str, ...]) -> None:
    if not owners:
        raise InvalidValue("must name at least one owner (@name:server)", attribute.name)
    for owner in owners:
        _check_user(instance, attribute, owner)
    if instance.user_id in owners:
        raise InvalidValue(
            f"holds the gateway's own id {instance.user_id!r}: it would answer itself",
            attribute.name,
        )


def _check_env(_instance: Any, attribute: Attribute[Any], name: str) -> None:
    if name and not _ENV.fullmatch(name):
        raise InvalidValue(f"{name!r} is not an environment variable's name", attribute.name)


def _check_secret(instance: Any, attribute: Attribute[Any], name: str) -> None:
    _check_env(instance, attribute, name)
    if not name and not instance.access_token_env:
        raise InvalidValue(
            "set access_token_env or password_env: the variable holding the bot's token or "
            "password",
            attribute.name,
        )


def _fits_event(_instance: Any, attribute: Attribute[Any], value: int) -> None:
    if value >= MATRIX_EVENT_BYTES:
        raise InvalidValue(
            f"must be less than a Matrix event's {MATRIX_EVENT_BYTES} bytes, got {value}",
            attribute.name,
        )


@frozen
class MatrixConfig:
    """The bot's account on `homeserver`: its token from the variable `access_token_env`, or
    its password from `password_env` (logged in once; the token then kept 0600 in the home).
    Only `owners` drive turns and answer approvals."""

    homeserver: str = field(validator=check_url)
    user_id: str = field(validator=_check_user)
    owners: tuple[str, ...] = field(validator=_check_owners)
    access_token_env: str = field(default="", validator=_check_env)
    password_env: str = field(default="", validator=_check_secret)
    device_name: str = "Boxmaker gateway"
    allow_shared_rooms: bool = False
    sync_timeout_s: float = field(default=30.0, validator=positive)


@frozen
class GatewayConfig:
    """`[gateway]`: a message over `max_message_bytes` is refused; the streamed answer is
    edited at most once per `edit_interval_s`."""

    max_message_bytes: int = field(default=16384, validator=[at_least(1), _fits_event])
    edit_interval_s: float = field(default=1.0, validator=positive)
    matrix: MatrixConfig | None = None
