"""The limit decisions of a turn (`loopd/loop/limits.py`), without a server or a session."""

from __future__ import annotations

from boxmaker import proto as p
from boxmaker.loopd.loop import Repeat, Run, Stop, TurnLimits

from ..helpers import make_config


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


# --- the budgets --------------------------------------------------------------------


def test_an_answer_is_never_stopped_by_a_budget() -> None:
    turn = limits("[loop]\nmax_completions = 1\nmax_predicted_tokens = 10\n")
    assert turn.after_completion(0, predicted=500) is None


def test_the_completion_that_reaches_max_completions_with_tool_calls_stops_the_turn() -> None:
    turn = limits("[loop]\nmax_completions = 3\n")
    assert turn.after_completion(1) is None
    assert turn.after_completion(2) is None
    stop = turn.after_completion(1)
    assert isinstance(stop, Stop)
    assert stop.reason == (
        "the turn used its budget of 3 completions and the last one asked for tools "
        "([loop] max_completions)"
    )


def test_predicted_tokens_add_up_and_stop_the_turn_once_over_the_budget() -> None:
    turn = limits("[loop]\nmax_predicted_tokens = 100\n")
    assert turn.after_completion(1, predicted=60) is None
    assert turn.after_completion(1, predicted=40) is None  # 100: at the budget, not over it
    stop = turn.after_completion(1, predicted=1)
    assert isinstance(stop, Stop)
    assert stop.reason == (
        "the turn's completions generated 101 tokens, over its budget of 100 "
        "([loop] max_predicted_tokens)"
    )


def test_when_several_limits_trip_at_once_the_tokens_come_first_then_completions() -> None:
    everything = "[loop]\nmax_predicted_tokens = 5\nmax_completions = 1\ntool_iterations = 1\n"
    turn = limits(everything)
    first = turn.after_completion(1, predicted=6)
    assert isinstance(first, Stop)
    assert "max_predicted_tokens" in first.reason
    turn = limits("[loop]\nmax_completions = 2\ntool_iterations = 1\n")
    assert turn.after_completion(1) is None
    second = turn.after_completion(1)
    assert isinstance(second, Stop)
    assert "max_completions" in second.reason  # tool_iterations is over too


def test_the_time_budget_names_its_key() -> None:
    assert limits("[loop]\nmax_seconds = 2.5\n").overtime() == Stop(
        "the turn ran past its budget of 2.5 s ([loop] max_seconds)"
    )


def test_a_message_taken_resets_iterations_and_repeats_but_not_the_budgets() -> None:
    turn = limits("[loop]\ntool_iterations = 1\nmax_completions = 3\n")
    assert turn.after_completion(1) is None
    assert turn.before_call(call()) == Run()
    turn.message_taken()
    assert turn.after_completion(1) is None  # a second iteration, but for a new message
    assert turn.before_call(call()) == Run()  # not a repeat of the call before the message
    stop = turn.after_completion(1)
    assert isinstance(stop, Stop)
    assert "max_completions" in stop.reason
