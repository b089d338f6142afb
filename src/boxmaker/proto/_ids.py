"""Session ids and timestamps: the two validated scalars every record carries.

A `SessionId` names a folder under `sessions/`, so its alphabet is closed and it can never
start with `.` or `-`: no accepted id is a path like `..`, an option, or a hidden file.
A `Timestamp` is RFC 3339 UTC with exactly six fractional digits, so parsing and formatting
are inverse to the byte and log lines stay byte-exact when read and written again.
"""

from __future__ import annotations

import re
import string
from datetime import UTC, datetime
from typing import Any

from attrs import field, frozen

__all__ = ["ORIGIN_MAX", "TIME_FORM", "InvalidValue", "Origin", "SessionId", "Timestamp"]


class InvalidValue(ValueError):
    """A value broke a rule of the protocol; the message names the value and the rule.

    `field` names the attribute a validator checked, so the converter can give the path.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


_ID_ALPHABET = frozenset(string.ascii_letters + string.digits + "._-")
_ID_MAX = 128
_ID_RULE = "allowed: letters, digits, '.', '_', '-'"


def _check_session_id(_instance: object, _attribute: object, value: str) -> None:
    if type(value) is not str:
        raise InvalidValue(f"session id must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidValue(f"session id is empty; {_ID_RULE}")
    if len(value) > _ID_MAX:
        raise InvalidValue(f"session id is {len(value)} characters long; at most {_ID_MAX}")
    for char in value:
        if char not in _ID_ALPHABET:
            raise InvalidValue(f"session id {value!r} has a {char!r}; {_ID_RULE}")
    if value[0] in ".-":
        raise InvalidValue(f"session id {value!r} starts with {value[0]!r}; it must not")


@frozen(order=True)
class SessionId:
    """1 to 128 characters of `[A-Za-z0-9._-]`, not starting with `.` or `-`.

    Raises:
        InvalidValue: for anything else, with a message naming the value and the rule.
    """

    value: str = field(validator=_check_session_id)

    def __str__(self) -> str:
        return self.value


ORIGIN_MAX = 256  # characters of an origin's channel and of its id


def _check_origin_part(_instance: object, attribute: Any, value: str) -> None:
    name = attribute.name
    if type(value) is not str:
        raise InvalidValue(f"origin {name} must be a string, not {type(value).__name__}", name)
    if not 1 <= len(value) <= ORIGIN_MAX:
        raise InvalidValue(
            f"origin {name} is {len(value)} characters long; 1 to {ORIGIN_MAX}", name
        )


@frozen
class Origin:
    """Where a message came from, as its channel names it: `channel` (`matrix`, `schedule`,
    ...) and its `id` there (an event id, a firing); 1 to 256 characters each. A session
    runs at most one turn of an origin: the same origin again is a duplicate.

    Raises:
        InvalidValue: a part that is not a string of 1 to 256 characters.
    """

    channel: str = field(validator=_check_origin_part)
    id: str = field(validator=_check_origin_part)

    def __str__(self) -> str:
        return f"{self.channel}:{self.id}"


# The one form of a time; `proto/_fast.py` reads it inline too.
TIME_FORM = re.compile(r"\d\d\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\d\d\d\dZ", re.ASCII)


def _check_utc(_instance: object, _attribute: object, value: datetime) -> None:
    if type(value) is datetime and value.tzinfo is UTC:
        return
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidValue(f"timestamp must be an aware datetime, not {value!r}")
    if value.utcoffset():
        raise InvalidValue(f"timestamp must be in UTC, not {value.isoformat()}")


@frozen(order=True)
class Timestamp:
    """A UTC instant with microseconds, written `2026-11-29T21:31:34.123456Z`."""

    value: datetime = field(validator=_check_utc)

    @classmethod
    def parse(cls, text: str) -> Timestamp:
        """Parse the one accepted form.

        Raises:
            InvalidValue: when `text` is not `YYYY-MM-DDTHH:MM:SS.ffffffZ` or not a real time.
        """
        if type(text) is not str or TIME_FORM.fullmatch(text) is None:
            raise InvalidValue(
                f"time {text!r} is not RFC 3339 UTC like 2026-11-29T21:31:34.123456Z"
            )
        try:
            moment = datetime.fromisoformat(text)  # the form is checked: this reads it fast
        except ValueError as exc:
            raise InvalidValue(f"time {text!r} is not a real time: {exc}") from exc
        # The form makes it UTC (`Z`), which is all the validator checks: resume reads a time
        # from every line, so it is built without running the validator again.
        stamp = object.__new__(cls)
        object.__setattr__(stamp, "value", moment)
        return stamp

    def __str__(self) -> str:
        v = self.value
        return (
            f"{v.year:04d}-{v.month:02d}-{v.day:02d}T"
            f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}Z"
        )
