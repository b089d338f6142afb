"""Shared test settings.

Hypothesis runs derandomized by default, so `make test` gives the same examples on every run
and machine (no luck); `HYPOTHESIS_PROFILE=soak` explores many more, randomly, and prints the
seed and blob that reproduce a failure. No deadlines: timing is not behaviour.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
