"""Shared test settings.

Hypothesis runs derandomized by default, so `make test` gives the same examples on every run
and machine (no luck); `HYPOTHESIS_PROFILE=soak` explores many more, randomly, and prints the
seed and blob that reproduce a failure. No deadlines: timing is not behaviour.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "default", deadline=None, derandomize=True, print_blob=True, max_examples=100
)
settings.register_profile(
    "soak",
    deadline=None,
    print_blob=True,
    max_examples=5000,
    suppress_health_check=[HealthCheck.too_slow],
)
# For seeing a check fail on purpose: report the first failure without minutes of shrinking.
settings.register_profile(
    "noshrink", deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        action="store_true",
        help="run the tests in tests/device, which need the real llama-server (make llama-server)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/device is a separate tier (`make verify-device`): the main suite never needs the
    real server."""
    if "device" in collection_path.parts and not config.getoption("--device"):
        return True
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The reliability tests' counts and outcomes (tests/soak.py), when any ran."""
    from .soak import COUNTS, NOTES, SOAK

    if not COUNTS and not NOTES:
        return
    terminalreporter.section(f"reliability counts ({'soak' if SOAK else 'quick'})")
    for what, outcomes in sorted(COUNTS.items()):
        parts = ", ".join(f"{outcome} {n:,}" for outcome, n in sorted(outcomes.items()))
        terminalreporter.write_line(f"{what}: {sum(outcomes.values()):,} ({parts})")
    for line in NOTES:
        terminalreporter.write_line(line)
