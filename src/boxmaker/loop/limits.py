"""Every limit of a turn, decided without I/O (SPEC section 6's table of limits).

A `TurnLimits` lives for one turn and is asked at each point where a runaway can be stopped:
after each completion (`after_completion`: too many tool iterations) and before each tool call
(`before_call`: a repeated identical call is answered without running it, a second repeat
ends the turn). It answers with a decision; the turn loop acts on it. Pure.
"""

from __future__ import annotations

from attrs import frozen

from ..config import LoopConfig
from ..proto import ToolCall

__all__ = ["REPEATED", "Repeat", "Run", "Stop", "TurnLimits"]

REPEATED = (
    "This call was already made with these arguments in this turn, so it was not run again. "
    "Use the result you have, or try something else."
)


@frozen
class Run:
    """Run the call."""


@frozen
class Repeat:
    """Do not run the call: its result is `REPEATED`."""


@frozen
class Stop:
    """End the turn with `turn_limit`; `reason` says which limit and its config key."""

    reason: str


class TurnLimits:
    def __init__(self, config: LoopConfig) -> None:
        self._config = config
        self._iterations = 0
        self._called: set[tuple[str, str]] = set()
        self._repeats = 0

    def after_completion(self, calls: int) -> Stop | None:
        """A completion asked for `calls` tool calls: is the turn over its iterations?"""
        if not calls:
            return None
        self._iterations += 1
        if self._iterations > self._config.tool_iterations:
            return Stop(
                f"the model asked for tools more than {self._config.tool_iterations} times "
                "in one turn ([loop] tool_iterations)"
            )
        return None

    def before_call(self, call: ToolCall) -> Run | Repeat | Stop:
        """Run the call, answer it as a repeat, or stop the turn at a second repeat."""
        key = (call.name, call.arguments)
        if not (self._config.repeat_detection and key in self._called):
            self._called.add(key)
            return Run()
        if self._repeats >= 1:
            return Stop(
                f"the model repeated an identical tool call a second time ({call.name}); "
                "[loop] repeat_detection"
            )
        self._repeats += 1
        return Repeat()
