"""The one wall clock. Every time that goes into a record is read through a `Clock`, so a
test can inject a `TickingClock` and know every byte of the log it will get.

(Durations and timeouts use trio's clock, which tests replace with `MockClock`.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

from attrs import define, field

from .proto import Timestamp

__all__ = ["Clock", "SystemClock", "TickingClock"]


class Clock(Protocol):
    def now(self) -> Timestamp: ...


class SystemClock:
    """The machine's UTC time."""

    def now(self) -> Timestamp:
        return Timestamp(datetime.now(UTC))


@define
class TickingClock:
    """A deterministic clock: each `now()` is `step` after the one before, from `start`."""

    start: Timestamp = field(factory=lambda: Timestamp.parse("2026-11-29T21:31:34.123456Z"))
    step: timedelta = timedelta(seconds=1)
    _ticks: int = field(default=0, init=False)

    def now(self) -> Timestamp:
        moment = self.start.value + self._ticks * self.step
        self._ticks += 1
        return Timestamp(moment)
