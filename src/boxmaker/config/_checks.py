"""The checks a section's fields share (attrs validators raising the converter's
`InvalidValue`, which the parse says with the key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import Attribute

from ..proto import InvalidValue

__all__ = ["at_least", "positive"]


def at_least(bound: float) -> Callable[[Any, Attribute[Any], Any], None]:
    def check(_instance: Any, attribute: Attribute[Any], value: Any) -> None:
        if value is not None and value < bound:
            raise InvalidValue(f"must be at least {bound}, got {value}", attribute.name)

    return check


def positive(_instance: Any, attribute: Attribute[Any], value: float) -> None:
    if value <= 0:
        raise InvalidValue(f"must be more than 0, got {value}", attribute.name)
