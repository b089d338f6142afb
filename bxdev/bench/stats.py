"""Figures from repeated measurements: medians with their spread, and growth with size. Pure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from attrs import frozen

__all__ = ["Spread", "growth_exponent", "p90", "spread"]


@frozen
class Spread:
    """The median of repeated runs, with the least and the most seen."""

    median: float
    low: float
    high: float
    n: int

    def show(self, unit: str = "", digits: int = 2) -> str:
        """`1.23 unit (min 1.00, max 2.00, n=50)`."""
        unit = f" {unit}" if unit else ""
        return (
            f"{self.median:,.{digits}f}{unit} "
            f"(min {self.low:,.{digits}f}, max {self.high:,.{digits}f}, n={self.n})"
        )


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no measurements")
    return Spread(statistics.median(values), min(values), max(values), len(values))


def p90(values: Sequence[float]) -> float:
    """The 90th percentile, between the two nearest values."""
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def growth_exponent(sizes: Sequence[float], costs: Sequence[float]) -> float:
    """The slope of log(cost) over log(size), by least squares: 1.0 is linear growth."""
    if len(sizes) != len(costs) or len(sizes) < 2:
        raise ValueError("need two or more sizes, one cost each")
    xs = [math.log(s) for s in sizes]
    ys = [math.log(c) for c in costs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return num / den
