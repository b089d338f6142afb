"""Every limit of a turn, decided without I/O (SPEC section 6's table of limits, and the
budgets).

A `TurnLimits` lives for one turn and is asked at each point where a runaway can be stopped:
after each completion is recorded and before its tool calls run (`after_completion`: the
budgets and the tool iterations), and before each tool call (`before_call`: a repeated
identical call is answered without running it (`words.REPEATED`), a second repeat ends the
turn). The turn's time budget is a deadline the turn loop sets; `overtime` words its stop. It
answers with a decision; the turn loop acts on it. Pure.

**Precedence.** A completion that asks for no tool call is the turn's answer: no budget
turns an answer into a stop. When a completion with tool calls is over more than one limit,
the first of these names the stop: `max_predicted_tokens`, `max_completions`,
`tool_iterations` (the turn's cost first, then the runaway). A completion stopped so is
recorded; its calls are closed as not run.

**Steering.** A soft break's message taken into the turn (`message_taken`) starts the
runaway limits afresh (tool iterations and repeats are judged per message of the person),
while the budgets count the whole turn.

**A fenced turn** (tool blocks in the text) does not end on a runaway: a second block that
cannot be read, the first repeated block, or one tool iteration too many ends its tool use
instead (`WrapUp`), and the turn asks for a plain answer (`wrap_up.py`). The budgets still
stop it.
"""

from __future__ import annotations

from attrs import frozen

from ...config import LoopConfig
from ...proto import ToolCall, WrapUpReason
from ...tools import BlockCall

__all__ = ["Repeat", "Run", "Stop", "TurnLimits", "WrapUp"]


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


@frozen
class WrapUp:
    """End a fenced turn's tool use: this call and the rest are not run, and a plain answer
    is asked for."""

    reason: WrapUpReason


class TurnLimits:
    def __init__(self, config: LoopConfig, *, fenced: bool = False) -> None:
        self._config = config
        self._fenced = fenced
        self._bad_blocks = 0
        self._completions = 0
        self._predicted = 0
        self._iterations = 0
        self._called: set[tuple[str, str]] = set()
        self._repeats = 0

    def after_completion(self, calls: int, predicted: int = 0) -> Stop | WrapUp | None:
        """A completion that generated `predicted` tokens was recorded and asks for `calls`
        tool calls: may they run, or is the turn over a budget or its tool iterations?"""
        config = self._config
        self._completions += 1
        self._predicted += predicted
        if not calls:
            return None
        self._iterations += 1
        if self._predicted > config.max_predicted_tokens:
            return Stop(
                f"the turn's completions generated {self._predicted} tokens, over its budget "
                f"of {config.max_predicted_tokens} ([loop] max_predicted_tokens)"
            )
        if self._completions >= config.max_completions:
            return Stop(
                f"the turn used its budget of {config.max_completions} completions and the "
                "last one asked for tools ([loop] max_completions)"
            )
        if self._iterations > config.tool_iterations:
            if self._fenced:
                return WrapUp(WrapUpReason.TOOL_ITERATIONS)
            return Stop(
                f"the model asked for tools more than {config.tool_iterations} times "
                "in one turn ([loop] tool_iterations)"
            )
        return None

    def before_call(self, call: ToolCall) -> Run | Repeat | Stop | WrapUp:
        """Run the call, answer it as a repeat, or stop the turn at a second repeat; in a
        fenced turn, end its tool use at a repeat or at a second block that cannot run."""
        key = (call.name, call.arguments)
        if self._fenced and isinstance(call, BlockCall) and call.problem is not None:
            self._bad_blocks += 1
            if self._bad_blocks >= 2:
                return WrapUp(WrapUpReason.BAD_BLOCKS)
            return Run()  # answered with its problem, briefly
        if not (self._config.repeat_detection and key in self._called):
            self._called.add(key)
            return Run()
        if self._fenced:
            return WrapUp(WrapUpReason.REPEATED_CALL)
        if self._repeats >= 1:
            return Stop(
                f"the model repeated an identical tool call a second time ({call.name}); "
                "[loop] repeat_detection"
            )
        self._repeats += 1
        return Repeat()

    def message_taken(self) -> None:
        """A message of the person joined the turn: the runaway limits start afresh."""
        self._iterations = 0
        self._called.clear()
        self._repeats = 0
        self._bad_blocks = 0

    def overtime(self) -> Stop:
        """The turn's deadline (`[loop] max_seconds`, from its start) passed."""
        return Stop(
            f"the turn ran past its budget of {self._config.max_seconds:g} s ([loop] max_seconds)"
        )
