"""The checks a section's fields share (attrs validators raising the converter's
`InvalidValue`, which the parse says with the key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from attrs import Attribute

from ..proto import InvalidValue

__all__ = ["at_least", "check_url", "positive"]


def at_least(bound: float) -> Callable[[Any, Attribute[Any], Any], None]:
    def check(_instance: Any, attribute: Attribute[Any], value: Any) -> None:
        if value is not None and value < bound:
            raise InvalidValue(f"must be at least {bound}, got {value}", attribute.name)

    return check


def positive(_instance: Any, attribute: Attribute[Any], value: float) -> None:
    if value <= 0:
        raise InvalidValue(f"must be more than 0, got {value}", attribute.name)


def check_url(_instance: Any, attribute: Attribute[Any], url: str) -> None:
    """`http://host:port` or `https://...`, with a path at most: what httpx can connect to."""
    example = 'e.g. "http://127.0.0.1:8080"'
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number from 0 to 65535
    except ValueError as exc:
        raise InvalidValue(f"{url!r} is not a URL ({exc}); {example}", attribute.name) from exc
    if parts.scheme not in ("http", "https"):
        hint = f'; did you mean "http://{url}"?' if "://" not in url else f"; {example}"
        raise InvalidValue(f"{url!r} must start with http:// or https://{hint}", attribute.name)
    if not parts.hostname:
        raise InvalidValue(f"{url!r} has no host; {example}", attribute.name)
    if port == 0 or (parts.port is None and parts.netloc.endswith(":")):
        raise InvalidValue(f"{url!r} has no port number; {example}", attribute.name)
    if parts.query or parts.fragment:
        raise InvalidValue(f"{url!r} has a query or fragment; {example}", attribute.name)
