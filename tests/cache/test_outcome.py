"""cache_outcome: the previous prompt must be reused whole."""

from __future__ import annotations

from boxmaker.loopd.cache import Hit, Loss, cache_outcome
from boxmaker.proto import Timings


def timings(cache_n: int, prompt_n: int) -> Timings:
    return Timings(
        cache_n=cache_n, prompt_n=prompt_n, predicted_n=9, prompt_ms=1.0, predicted_ms=2.0
    )


def test_reusing_the_whole_previous_prompt_is_a_hit() -> None:
    assert cache_outcome(timings(1000, 200), timings(1200, 40)) == Hit()
    assert cache_outcome(timings(1000, 200), timings(1215, 3)) == Hit()


def test_reusing_less_is_a_loss_with_both_figures() -> None:
    assert cache_outcome(timings(1000, 200), timings(1199, 41)) == Loss(expected=1200, got=1199)
    assert cache_outcome(timings(0, 35), timings(0, 60)) == Loss(expected=35, got=0)
