"""The limit decisions of a turn (`loop/limits.py`), without a server or a session."""

from __future__ import annotations

from boxmaker import proto as p
from boxmaker.loop import Repeat, Run, Stop, TurnLimits

from .helpers import make_config


def limits(config: str = "") -> TurnLimits:
    return TurnLimits(make_config(config).loop)


def call(name: str = "clock", arguments: str = "{}") -> p.ToolCall:
    return p.ToolCall(id="c", name=name, arguments=arguments)


def test_a_completion_without_calls_never_counts_as_an_iteration() -> None:
    turn = limits("[loop]\ntool_iterations = 1\n")
    assert [turn.after_completion(0) for _ in range(5)] == [None] * 5
    assert turn.after_completion(2) is None


def test_one_iteration_past_the_limit_stops_the_turn_naming_the_key() -> None:
    turn = limits("[loop]\ntool_iterations = 2\n")
    assert turn.after_completion(1) is None
    assert turn.after_completion(3) is None
    stop = turn.after_completion(1)
    assert isinstance(stop, Stop)
    assert "more than 2 times" in stop.reason
    assert "[loop] tool_iterations" in stop.reason


def test_the_first_repeat_is_answered_and_the_second_stops_the_turn() -> None:
    turn = limits()
    assert turn.before_call(call()) == Run()
    assert turn.before_call(call("echo", '{"text": "a"}')) == Run()
    assert turn.before_call(call()) == Repeat()
    assert turn.before_call(call("echo", '{"text": "b"}')) == Run()  # other arguments
    stop = turn.before_call(call("echo", '{"text": "a"}'))
    assert isinstance(stop, Stop)
    assert "a second time (echo)" in stop.reason


def test_without_repeat_detection_every_call_runs() -> None:
    turn = limits("[loop]\nrepeat_detection = false\n")
    assert [turn.before_call(call()) for _ in range(4)] == [Run()] * 4


def test_each_turn_starts_its_counts_afresh() -> None:
    first, second = limits("[loop]\ntool_iterations = 1\n"), limits("[loop]\ntool_iterations = 1\n")
    assert first.after_completion(1) is None
    assert first.before_call(call()) == Run()
    assert second.after_completion(1) is None
    assert second.before_call(call()) == Run()
